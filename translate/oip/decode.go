package oip

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// DecodeResponse decodes a v2 infer response into its output tensors, in
// the response's order (docs/open-inference-protocol.md §6.2). headerLength is the
// Inference-Header-Content-Length value (see ParseHeaderLength), or -1
// when the response had none and the whole body is JSON.
//
// Each output whose parameters carry binary_data_size takes the next that
// many bytes after the JSON (checked against what is left first; 0 is an
// empty tensor); the others are read from "data" (see decodeData). Fixed
// size data and BYTES elements alias body, which the caller keeps alive
// and unmodified while the tensors are in use.
//
// sig may be nil. When it declares an output of rank 1 and the response
// has shape [N,1], the shape is reported as [N]: MLServer reshapes 1-D
// numpy outputs that way (docs/open-inference-protocol.md §6.3). Element counts are checked against
// lim.MaxElements, and sizes against the bytes that arrived, before
// anything is allocated. Errors are *apierr.Error with code BadGateway.
func DecodeResponse(body []byte, headerLength int, sig *tensor.Signature, lim tensor.Limits) ([]tensor.Tensor, error) {
	header, bin := body, []byte(nil)
	switch {
	case headerLength == -1:
	case headerLength > 0 && headerLength <= len(body):
		header, bin = body[:headerLength], body[headerLength:]
	default:
		return nil, badResponse(nil, "JSON header length %d does not fit a body of %d bytes", headerLength, len(body))
	}
	d := decoder{bin: bin, sig: sig, lim: lim.OrDefault()}
	return d.decode(header)
}

// Block is one binary block announced by a response's JSON header.
type Block struct {
	// Output is the index of the output the block belongs to.
	Output int
	// Size is the block's binary_data_size.
	Size uint64
}

// ResponseHeader is a binary response's JSON header decoded before its
// binary section has arrived (DecodeResponseHeader).
type ResponseHeader struct {
	// Outputs are the outputs, in the response's order: those with JSON
	// "data" complete, those with a binary block without their data
	// (FillBytes fills a BYTES one; fixed-size data is the caller's to
	// place, Size bytes of it).
	Outputs []tensor.Tensor
	// Blocks are the binary blocks in body order.
	Blocks []Block
}

// DecodeResponseHeader decodes the JSON header of a binary v2 response
// (the first Inference-Header-Content-Length bytes) as DecodeResponse
// would if every binary block announced were there: every check that
// needs only the header is made (names, datatypes, shapes against
// lim.MaxElements, a fixed-size block's size against its shape, a BYTES
// block's size against its element count, duplicate names). What needs the
// binary section is the caller's: FillBytes for BYTES blocks, the total
// length against the blocks' sizes.
//
// final reports that an error is the one DecodeResponse returns for every
// body that starts with this header: the failed check comes before
// anything DecodeResponse reads from the binary section (a non-empty
// block, the section's total length), so nothing there can make it fail
// first. Errors are *apierr.Error
// with code BadGateway, DecodeResponse's texts.
func DecodeResponseHeader(header []byte, sig *tensor.Signature, lim tensor.Limits) (h ResponseHeader, final bool, err error) {
	d := decoder{lazy: true, sig: sig, lim: lim.OrDefault()}
	h.Outputs, err = d.decode(header)
	if err != nil {
		return ResponseHeader{}, !d.needsData, err
	}
	h.Blocks = d.blocks
	return h, false, nil
}

// decode decodes the header's outputs, taking their blocks from d.bin (or,
// lazily, only recording them).
func (d *decoder) decode(header []byte) ([]tensor.Tensor, error) {
	doc, err := jsontext.Parse(header, jsontext.ForElements(d.lim.MaxDepth, d.lim.MaxElements))
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

// decoder holds the state of one DecodeResponse walk.
type decoder struct {
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

func (d *decoder) output(t *tensor.Tensor, i int, o jsontext.Value) error {
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

	size, hasSize, base64Data, err := outputParameters(t, o)
	if err != nil {
		return err
	}
	if hasSize {
		err = d.binaryBlock(t, i, n, size)
	} else {
		err = decodeData(t, o, n, base64Data)
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
func (d *decoder) outputSpec(name []byte) *tensor.Spec {
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
func (d *decoder) shape(t *tensor.Tensor, o jsontext.Value) (int64, error) {
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

// outputParameters reads binary_data_size and content_type from an
// output's parameters (absent and null are both "none").
func outputParameters(t *tensor.Tensor, o jsontext.Value) (size uint64, hasSize, base64Data bool, err error) {
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
func (d *decoder) binaryBlock(t *tensor.Tensor, i int, n int64, size uint64) error {
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

// FillBytes splits a BYTES output's complete binary block into its
// elements (4-byte little-endian length, then the bytes; the elements
// alias block), as many as t's shape holds, every length checked before
// it is used. Errors are DecodeResponse's.
func FillBytes(t *tensor.Tensor, block []byte) error {
	n, err := tensor.NumElements(t.Shape)
	if err != nil || n == 0 {
		return err
	}
	strs := make([][]byte, n)
	p := block
	for i := range strs {
		if len(p) < 4 {
			return badResponse(nil, "output '%s': BYTES element %d has an incomplete length prefix", clip(t.Name, 64), i)
		}
		l := binary.LittleEndian.Uint32(p)
		p = p[4:]
		if uint64(l) > uint64(len(p)) {
			return badResponse(nil, "output '%s': BYTES element %d announces %d bytes but only %d remain", clip(t.Name, 64), i, l, len(p))
		}
		strs[i] = p[:l:l]
		p = p[l:]
	}
	if len(p) != 0 {
		return badResponse(nil, "output '%s': %d bytes of binary data follow its %d BYTES elements", clip(t.Name, 64), len(p), n)
	}
	t.Strings = strs
	return nil
}

// duplicateName reports a name used by two outputs.
func duplicateName(ts []tensor.Tensor) (string, bool) {
	if len(ts) <= 16 {
		for i := range ts {
			for j := i + 1; j < len(ts); j++ {
				if ts[i].Name == ts[j].Name {
					return ts[i].Name, true
				}
			}
		}
		return "", false
	}
	seen := make(map[string]struct{}, len(ts))
	for i := range ts {
		if _, ok := seen[ts[i].Name]; ok {
			return ts[i].Name, true
		}
		seen[ts[i].Name] = struct{}{}
	}
	return "", false
}

func onlySpace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// errBadResponse marks every DecodeResponse error for errors.Is.
var errBadResponse = errors.New("invalid v2 response")

// badResponse is the error for a response that cannot be translated: a
// 502, since the fault is the inference server's, not the client's.
func badResponse(cause error, format string, args ...any) *apierr.Error {
	if cause == nil {
		cause = errBadResponse
	}
	return apierr.Wrap(apierr.BadGateway, cause, "invalid response from inference server: "+fmt.Sprintf(format, args...))
}
