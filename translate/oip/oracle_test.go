package oip

// The tape-based v2 response decoder that decode.go replaced, kept as the
// oracle of FuzzDecodeOracle: the streaming decoder must give the same
// tensors, errors and "final" flags for every header.

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/internal/jsontape"

	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"

	"github.com/tfsbridge/tfsbridge/test/conformance"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/x448/float16"
)

// oracleDecodeResponse is DecodeResponse over the tape.
func oracleDecodeResponse(body []byte, headerLength int, sig *tensor.Signature, lim tensor.Limits) ([]tensor.Tensor, error) {
	header, bin := body, []byte(nil)
	switch {
	case headerLength == -1:
	case headerLength > 0 && headerLength <= len(body):
		header, bin = body[:headerLength], body[headerLength:]
	default:
		return nil, badResponse(nil, "JSON header length %d does not fit a body of %d bytes", headerLength, len(body))
	}
	d := oracleDecoder{bin: bin, sig: sig, lim: lim.OrDefault()}
	return d.decode(header)
}

// oracleDecodeResponseHeader is DecodeResponseHeader over the tape.
func oracleDecodeResponseHeader(header []byte, sig *tensor.Signature, lim tensor.Limits) (h ResponseHeader, final bool, err error) {
	d := oracleDecoder{lazy: true, sig: sig, lim: lim.OrDefault()}
	h.Outputs, err = d.decode(header)
	if err != nil {
		return ResponseHeader{}, !d.needsData, err
	}
	h.Blocks = d.blocks
	return h, false, nil
}

// decode decodes the header's outputs, taking their blocks from d.bin (or,
// lazily, only recording them).
func (d *oracleDecoder) decode(header []byte) ([]tensor.Tensor, error) {
	doc, err := jsontape.Parse(header, jsontape.ForElements(d.lim.MaxDepth, d.lim.MaxElements))
	if err != nil {
		if len(header) == 0 {
			return nil, badResponse(err, "empty body")
		}
		return nil, badResponse(err, "malformed JSON: %v", err)
	}
	defer doc.Release()
	root := doc.Root()
	if root.Kind() != jsontext.Object {
		return nil, badResponse(nil, "the JSON is a %v, not an object", root.Kind())
	}
	if end := root.Offset() + len(root.Raw()); !onlySpace(header[end:]) {
		return nil, badResponse(nil, "unexpected data after the JSON at offset %d", end)
	}
	outs, ok := root.Member("outputs")
	if !ok || outs.Kind() != jsontext.Array {
		return nil, badResponse(nil, "no \"outputs\" list")
	}
	// Check the outputs' form before allocating a tensor for each: every
	// real output is an object with at least a name, datatype and shape,
	// so the tensor list stays small next to the body that declares it.
	for i, o := range outs.Elems() {
		if o.Kind() != jsontext.Object || o.Len() < 3 {
			return nil, badResponse(nil, "output %d is not an object with a name, datatype and shape", i)
		}
	}
	tensors := make([]tensor.Tensor, outs.Len())
	for i, o := range outs.Elems() {
		if err := d.output(&tensors[i], i, o); err != nil {
			return nil, err
		}
	}
	if d.lazy {
		// The binary section's length is checked here, before what follows.
		d.needsData = true
	} else if d.off != len(d.bin) {
		return nil, badResponse(nil, "%d bytes of binary data follow the last output", len(d.bin)-d.off)
	}
	if name, dup := duplicateName(tensors); dup {
		return nil, badResponse(nil, "output '%s' appears twice", clip(name, 64))
	}
	return tensors, nil
}

// oracleDecoder holds the state of one DecodeResponse walk.
type oracleDecoder struct {
	bin   []byte // the binary section after the JSON header
	off   int    // bytes of bin consumed so far
	sig   *tensor.Signature
	lim   tensor.Limits
	total int64 // elements decoded so far, against lim.MaxElements

	// lazy: the binary section has not arrived; blocks are recorded in
	// blocks, and needsData is set once a non-empty one is met (from
	// there on, DecodeResponse's outcome depends on the binary section).
	lazy      bool
	blocks    []Block
	needsData bool
}

func (d *oracleDecoder) output(t *tensor.Tensor, i int, o jsontape.Value) error {
	nameV, ok := o.Member("name")
	if !ok || nameV.Kind() != jsontext.String || len(nameV.Str()) == 0 {
		return badResponse(nil, "output %d has no name", i)
	}
	spec := d.outputSpec(nameV.Str())
	if spec != nil {
		t.Name = spec.Name // no allocation for the common case
	} else {
		t.Name = string(nameV.Str())
	}
	dtV, ok := o.Member("datatype")
	if !ok || dtV.Kind() != jsontext.String {
		return badResponse(nil, "output '%s' has no datatype", clip(t.Name, 64))
	}
	if t.DataType, ok = tensor.ParseV2(string(dtV.Str())); !ok {
		return badResponse(nil, "output '%s' has unknown datatype '%s'", clip(t.Name, 64), clip(string(dtV.Str()), 32))
	}
	n, err := d.shape(t, o)
	if err != nil {
		return err
	}

	size, hasSize, base64Data, err := oracleOutputParameters(t, o)
	if err != nil {
		return err
	}
	if hasSize {
		err = d.binaryBlock(t, i, n, size)
	} else {
		err = oracleDecodeData(t, o, n, base64Data)
	}
	if err != nil {
		return err
	}
	// MLServer reports a 1-D output [N] as [N,1]; give the client the
	// model's declared rank back.
	if spec != nil && len(spec.Shape) == 1 && len(t.Shape) == 2 && t.Shape[1] == 1 &&
		(spec.Shape[0] == -1 || spec.Shape[0] == t.Shape[0]) {
		t.Shape = t.Shape[:1:1]
	}
	return nil
}

// outputSpec returns the signature's spec for the output named name.
// When the model map renamed tensors (sig.Wire), name is looked up among
// the v2 names and the spec returned carries the TF name, so the output,
// and every error that names it, speaks the client's names.
func (d *oracleDecoder) outputSpec(name []byte) *tensor.Spec {
	if d.sig == nil {
		return nil
	}
	wire := d.sig.OnWire()
	for i := range wire.Outputs {
		if wire.Outputs[i].Name == string(name) && i < len(d.sig.Outputs) {
			return &d.sig.Outputs[i]
		}
	}
	return nil
}

// shape reads the output's shape into t and returns its element count,
// counted against lim.MaxElements before any data is allocated.
func (d *oracleDecoder) shape(t *tensor.Tensor, o jsontape.Value) (int64, error) {
	v, ok := o.Member("shape")
	if !ok || v.Kind() != jsontext.Array {
		return 0, badResponse(nil, "output '%s' has no shape", clip(t.Name, 64))
	}
	t.Shape = make([]int64, v.Len())
	for j, dim := range v.Elems() {
		if !dim.Num().IsInt64() || dim.Num().Int64() < 0 {
			return 0, badResponse(nil, "output '%s' has an invalid dimension %s", clip(t.Name, 64), clip(string(dim.Raw()), 32))
		}
		t.Shape[j] = dim.Num().Int64()
	}
	n, err := tensor.NumElements(t.Shape)
	if err != nil || n > d.lim.MaxElements-d.total {
		return 0, badResponse(err, "output '%s' has shape %v, more than the limit of %d elements", clip(t.Name, 64), t.Shape, d.lim.MaxElements)
	}
	d.total += n
	return n, nil
}

// oracleOutputParameters reads binary_data_size and content_type from an
// output's parameters (absent and null are both "none").
func oracleOutputParameters(t *tensor.Tensor, o jsontape.Value) (size uint64, hasSize, base64Data bool, err error) {
	p, ok := o.Member("parameters")
	if !ok || p.Kind() == jsontext.Null {
		return 0, false, false, nil
	}
	if p.Kind() != jsontext.Object {
		return 0, false, false, badResponse(nil, "output '%s' has parameters that are not an object", clip(t.Name, 64))
	}
	if v, ok := p.Member("binary_data_size"); ok && v.Kind() != jsontext.Null {
		if !v.Num().IsUint64() {
			return 0, false, false, badResponse(nil, "output '%s' has an invalid binary_data_size %s", clip(t.Name, 64), clip(string(v.Raw()), 32))
		}
		size, hasSize = v.Num().Uint64(), true
	}
	if v, ok := p.Member("content_type"); ok && v.Kind() == jsontext.String {
		base64Data = string(v.Str()) == "base64"
	}
	return size, hasSize, base64Data, nil
}

// binaryBlock takes the output's block from the binary section: fixed-size
// data aliased as is, BYTES split at their 4-byte little-endian length
// prefixes, every length checked before it is used.
//
// Lazily, the block is only recorded and its size checked.
func (d *oracleDecoder) binaryBlock(t *tensor.Tensor, i int, n int64, size uint64) error {
	var block []byte
	if d.lazy {
		d.blocks = append(d.blocks, Block{Output: i, Size: size})
		d.needsData = d.needsData || size > 0
	} else {
		rest := uint64(len(d.bin) - d.off)
		if size > rest {
			return badResponse(nil, "output '%s' announces %d bytes of binary data but only %d remain", clip(t.Name, 64), size, rest)
		}
		block = d.bin[d.off : d.off+int(size) : d.off+int(size)]
		d.off += int(size)
	}
	if t.DataType != tensor.Bytes {
		if want := uint64(n) * uint64(t.DataType.Size()); size != want {
			return badResponse(nil, "output '%s' has %d bytes of binary data, shape %v of %v needs %d", clip(t.Name, 64), size, t.Shape, t.DataType, want)
		}
		if n > 0 {
			t.Data = block
		}
		return nil
	}
	// Every element takes at least its 4-byte prefix: a count the block
	// cannot hold is rejected before the element list is allocated.
	if uint64(n) > size/4 {
		return badResponse(nil, "output '%s' has %d bytes of binary data, too few for %d BYTES elements", clip(t.Name, 64), size, n)
	}
	if n == 0 || d.lazy {
		return nil
	}
	return FillBytes(t, block)
}

// oracleDecodeData reads an output's JSON "data" (docs/open-inference-protocol.md §6.3) into t, which has n
// elements. The servers write a flat list; MLServer custom models may nest
// it or write a bare scalar, so leaves are taken in document order
// whatever the nesting (as Triton does for requests). Values:
//   - floats: numbers, NaN/Infinity tokens (Triton), null as NaN (KServe,
//     MLServer); parsed with strconv so FP64 is exact and FP32 is rounded
//     once, straight from the text;
//   - integers: integer tokens exactly, 64-bit included; an integral
//     number written with a fraction or exponent is tolerated if in range;
//   - BOOL: true/false, and 0/1 (numpy-backed servers may write either);
//   - BYTES: strings, base64-decoded when content_type is "base64".
//
// The leaf count must equal n, with one exception: MLServer writes a
// fixed-width numpy bytes array as one concatenated string (docs/open-inference-protocol.md §6.3).
// When a BYTES output's strings do not number n but their total length
// splits into n equal widths, they are split that way and each element's
// trailing NUL padding is dropped, which is what numpy's fixed-width
// elements hold. Any other count mismatch is an error.
func oracleDecodeData(t *tensor.Tensor, o jsontape.Value, n int64, base64Data bool) error {
	data, ok := o.Member("data")
	if !ok || data.Kind() == jsontext.Null {
		if n == 0 {
			return nil
		}
		return badResponse(nil, "output '%s' has neither data nor binary_data_size", clip(t.Name, 64))
	}
	leaves := oracleCountLeaves(data)
	if t.DataType == tensor.Bytes {
		return oracleDecodeStrings(t, data, n, leaves, base64Data)
	}
	if int64(leaves) != n {
		return badResponse(nil, "output '%s' has %d data elements, shape %v needs %d", clip(t.Name, 64), leaves, t.Shape, n)
	}
	if n == 0 {
		return nil
	}
	size := t.DataType.Size()
	t.Data = make([]byte, int(n)*size)
	i := 0
	var err error
	oracleWalkLeaves(data, func(v jsontape.Value) bool {
		err = oraclePutNumber(t, i, v)
		i++
		return err == nil
	})
	return err
}

// oracleCountLeaves counts the non-array values under v (1 for a scalar).
func oracleCountLeaves(v jsontape.Value) int {
	if v.Kind() != jsontext.Array {
		return 1
	}
	c := 0
	for _, e := range v.Elems() {
		c += oracleCountLeaves(e)
	}
	return c
}

// oracleWalkLeaves calls f for every non-array value under v in document order
// until f returns false. Nesting is bounded by the reader's depth limit.
func oracleWalkLeaves(v jsontape.Value, f func(jsontape.Value) bool) bool {
	if v.Kind() != jsontext.Array {
		return f(v)
	}
	for _, e := range v.Elems() {
		if !oracleWalkLeaves(e, f) {
			return false
		}
	}
	return true
}

// oraclePutNumber stores leaf v as element i of fixed-size tensor t.
func oraclePutNumber(t *tensor.Tensor, i int, v jsontape.Value) error {
	d := t.Data
	switch t.DataType {
	case tensor.Bool:
		switch {
		case v.Kind() == jsontext.True, v.Num().IsUint64() && v.Num().Uint64() == 1:
			d[i] = 1
		case v.Kind() == jsontext.False, v.Num().IsUint64() && v.Num().Uint64() == 0:
			d[i] = 0
		default:
			return oracleBadValue(t, v)
		}
	case tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64:
		u, ok := oracleLeafUint(v)
		bits := 8 * t.DataType.Size()
		if !ok || (bits < 64 && u >= 1<<bits) {
			return oracleBadValue(t, v)
		}
		oraclePutUint(d, i, bits, u)
	case tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64:
		x, ok := oracleLeafInt(v)
		bits := 8 * t.DataType.Size()
		if !ok || (bits < 64 && (x < -1<<(bits-1) || x >= 1<<(bits-1))) {
			return oracleBadValue(t, v)
		}
		oraclePutUint(d, i, bits, uint64(x))
	case tensor.FP32:
		f, ok := oracleLeafFloat(v, 32)
		if !ok {
			return oracleBadValue(t, v)
		}
		binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(float32(f)))
	case tensor.FP64:
		f, ok := oracleLeafFloat(v, 64)
		if !ok {
			return oracleBadValue(t, v)
		}
		binary.LittleEndian.PutUint64(d[8*i:], math.Float64bits(f))
	case tensor.FP16:
		f, ok := oracleLeafFloat(v, 32)
		if !ok {
			return oracleBadValue(t, v)
		}
		binary.LittleEndian.PutUint16(d[2*i:], float16.Fromfloat32(float32(f)).Bits())
	case tensor.BF16:
		f, ok := oracleLeafFloat(v, 32)
		if !ok {
			return oracleBadValue(t, v)
		}
		// Truncation, as tritonclient encodes BF16 (docs/open-inference-protocol.md §4).
		binary.LittleEndian.PutUint16(d[2*i:], tensor.BF16FromFloat32(float32(f)))
	default:
		return oracleBadValue(t, v)
	}
	return nil
}

// oracleLeafInt returns an integer leaf exactly; an integral double in int64
// range is accepted too.
func oracleLeafInt(v jsontape.Value) (int64, bool) {
	if v.Num().IsInt64() {
		return v.Num().Int64(), true
	}
	if f, ok := oracleIntegralDouble(v); ok && f >= -(1<<63) && f < 1<<63 {
		return int64(f), true
	}
	return 0, false
}

// oracleLeafUint is oracleLeafInt for unsigned values.
func oracleLeafUint(v jsontape.Value) (uint64, bool) {
	if v.Num().IsUint64() {
		return v.Num().Uint64(), true
	}
	if f, ok := oracleIntegralDouble(v); ok && f >= 0 && f < 1<<64 {
		return uint64(f), true
	}
	return 0, false
}

func oracleIntegralDouble(v jsontape.Value) (float64, bool) {
	if !v.IsNumber() || v.Num().IsInt64() || v.Num().IsUint64() {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v.Raw()), 64)
	if err != nil || f != math.Trunc(f) {
		return 0, false
	}
	return f, true
}

// oracleLeafFloat returns a float leaf rounded once to bits (32 or 64): integer
// tokens converted, other numbers (NaN and Infinity tokens included)
// parsed from their text, null as NaN.
func oracleLeafFloat(v jsontape.Value, bits int) (float64, bool) {
	switch {
	case v.Kind() == jsontext.Null:
		return math.NaN(), true
	case v.Num().IsInt64():
		return oracleRoundTo(float64(v.Num().Int64()), v, bits), true
	case v.Num().IsUint64():
		return oracleRoundTo(float64(v.Num().Uint64()), v, bits), true
	case v.IsNumber():
		f, err := strconv.ParseFloat(string(v.Raw()), bits)
		if err != nil && !isRangeErr(err) {
			return 0, false
		}
		return f, true
	}
	return 0, false
}

// oracleRoundTo rounds an integer leaf to bits once: float64(int64) may already
// round, so large integers are re-read from their text at the target
// precision.
func oracleRoundTo(f float64, v jsontape.Value, bits int) float64 {
	if math.Abs(f) < 1<<24 {
		return f
	}
	if g, err := strconv.ParseFloat(string(v.Raw()), bits); err == nil || isRangeErr(err) {
		return g
	}
	return f
}

func oracleBadValue(t *tensor.Tensor, v jsontape.Value) error {
	return badResponse(nil, "output '%s' holds %s, not a valid %v value", clip(t.Name, 64), clip(string(v.Raw()), 32), t.DataType)
}

// oracleDecodeStrings reads BYTES data. Strings without escapes alias the body;
// oracleEscaped and base64 strings are decoded into one arena allocated at its
// exact size after a first pass.
func oracleDecodeStrings(t *tensor.Tensor, data jsontape.Value, n int64, leaves int, base64Data bool) error {
	arena := 0
	var err error
	oracleWalkLeaves(data, func(v jsontape.Value) bool {
		if v.Kind() != jsontext.String {
			err = badResponse(nil, "output '%s' holds %s, not a BYTES string", clip(t.Name, 64), clip(string(v.Raw()), 32))
			return false
		}
		switch {
		case base64Data:
			arena += base64.StdEncoding.DecodedLen(len(v.Str()))
		case oracleEscaped(v):
			arena += len(v.Str())
		}
		return true
	})
	if err != nil {
		return err
	}
	if int64(leaves) != n && (n == 0 || leaves == 0) {
		return badResponse(nil, "output '%s' has %d data elements, shape %v needs %d", clip(t.Name, 64), leaves, t.Shape, n)
	}
	if n == 0 {
		return nil
	}
	buf := make([]byte, 0, arena)
	strs := make([][]byte, 0, leaves)
	oracleWalkLeaves(data, func(v jsontape.Value) bool {
		s := v.Str()
		switch {
		case base64Data:
			start := len(buf)
			if buf, err = base64.StdEncoding.AppendDecode(buf, s); err != nil {
				err = badResponse(err, "output '%s' holds invalid base64 data", clip(t.Name, 64))
				return false
			}
			s = buf[start:len(buf):len(buf)]
		case oracleEscaped(v):
			start := len(buf)
			buf = append(buf, s...)
			s = buf[start:len(buf):len(buf)]
		default:
			s = s[:len(s):len(s)]
		}
		strs = append(strs, s)
		return true
	})
	if err != nil {
		return err
	}
	if int64(leaves) != n {
		return splitFixedWidth(t, strs, n)
	}
	t.Strings = strs
	return nil
}

// oracleEscaped reports a string leaf whose contents differ from its text, so
// Str points into the document's pooled memory and must be copied.
func oracleEscaped(v jsontape.Value) bool { return len(v.Raw()) != len(v.Str())+2 }

func oraclePutUint(d []byte, i, bits int, u uint64) {
	switch bits {
	case 8:
		d[i] = byte(u)
	case 16:
		binary.LittleEndian.PutUint16(d[2*i:], uint16(u))
	case 32:
		binary.LittleEndian.PutUint32(d[4*i:], uint32(u))
	default:
		binary.LittleEndian.PutUint64(d[8*i:], u)
	}
}

// FuzzDecodeOracle: the streaming decoder answers every body as the tape
// decoder it replaced does (tensors, error texts, DecodeResponseHeader's
// blocks and final flag), with and without a signature to rename.
func FuzzDecodeOracle(f *testing.F) {
	for _, c := range conformance.MustLoad(f, "oip_cases.json") {
		if _, ok := responseExpectations[c.ID]; ok {
			body, hl := responseBody(f, c)
			f.Add(body, hl)
		}
	}
	for _, s := range []string{
		`{"outputs":[{"data":[1,2],"name":"y","shape":[2],"datatype":"INT8"}]}`,
		`{"outputs":[{"name":"y","datatype":"FP32","data":[1,"x",3],"shape":[3],"parameters":{"binary_data_size":12}}]}`,
		`{"outputs":[{"name":"y","datatype":"BYTES","shape":[2],"data":["YQ==","Yg\u003d\u003d"],"parameters":{"content_type":"base64"}}],"outputs":3}`,
		`{"outputs":[{"name":"y","datatype":"BOOL","shape":[3],"data":[true,0,{"a":1}]},7]}`,
		`{"outputs":[{"name":"a","datatype":"UINT8","shape":[[1]],"data":[1]},{"name":"b","datatype":"FP64","shape":[1],"data":[null]}]} x`,
		`{"outputs":[{"name":"y","name":"z","datatype":"FP16","datatype":3,"shape":[2],"shape":[9],"data":[1e400,-1e-400],"data":[]}]}`,
		`{"outputs":[{"name":"y","datatype":"BYTES","shape":[2,1],"data":"ab\u0000c"}]}`,
		`[1,2`,
		``,
	} {
		f.Add([]byte(s), -1)
	}
	f.Add([]byte(`{"outputs":[{"name":"y","datatype":"BYTES","shape":[3],"parameters":{"binary_data_size":9}},{"name":"z","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":1}}]}`+"\x01\x00\x00\x00a\x00\x00\x00\x00\x05"), 140)
	sig := &tensor.Signature{Outputs: []tensor.Spec{{Name: "y", DataType: tensor.FP32, Shape: []int64{-1}}}}
	f.Fuzz(func(t *testing.T, body []byte, hl int) {
		for _, s := range []*tensor.Signature{nil, sig} {
			got, err := DecodeResponse(body, hl, s, fuzzLimits)
			want, werr := oracleDecodeResponse(body, hl, s, fuzzLimits)
			sameDecode(t, "DecodeResponse", got, want, err, werr)
			if hl <= 0 || hl > len(body) {
				continue
			}
			h, final, err := DecodeResponseHeader(body[:hl], s, fuzzLimits)
			wh, wfinal, werr := oracleDecodeResponseHeader(body[:hl], s, fuzzLimits)
			sameDecode(t, "DecodeResponseHeader", h.Outputs, wh.Outputs, err, werr)
			if final != wfinal || !reflect.DeepEqual(h.Blocks, wh.Blocks) {
				t.Fatalf("DecodeResponseHeader: final %v blocks %v, want %v %v", final, h.Blocks, wfinal, wh.Blocks)
			}
		}
	})
}

func sameDecode(t *testing.T, what string, got, want []tensor.Tensor, err, werr error) {
	t.Helper()
	if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
		t.Fatalf("%s: error %v, want %v", what, err, werr)
	}
	if len(got) != len(want) || (got == nil) != (want == nil) {
		t.Fatalf("%s: %d outputs, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.DataType != w.DataType || !slices.Equal(g.Shape, w.Shape) ||
			!bytes.Equal(g.Data, w.Data) || (g.Data == nil) != (w.Data == nil) ||
			!slices.EqualFunc(g.Strings, w.Strings, bytes.Equal) || (g.Strings == nil) != (w.Strings == nil) {
			t.Fatalf("%s: output %d = %+v, want %+v", what, i, g, w)
		}
	}
}
