package oip

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"strconv"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/x448/float16"
)

// decodeData reads an output's JSON "data" (docs/open-inference-protocol.md §6.3) into t, which has n
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
//
// The checks come in that order: the data's presence, the leaf count, then
// the first leaf that is no valid value.
func (d *decoder) decodeData(t *tensor.Tensor, o *output, n int64) error {
	x := &o.data
	if !x.seen || x.null {
		if n == 0 {
			return nil
		}
		return badResponse(nil, "output '%s' has neither data nor binary_data_size", clip(t.Name, 64))
	}
	if !x.done {
		d.reread(x, t.DataType, n)
	}
	if t.DataType == tensor.Bytes {
		return decodeStrings(t, x, n, o.base64)
	}
	if x.leaves != n {
		return badResponse(nil, "output '%s' has %d data elements, shape %v needs %d", clip(t.Name, 64), x.leaves, t.Shape, n)
	}
	if n == 0 {
		return nil
	}
	if x.bad != nil {
		return badValue(t, x.bad)
	}
	t.Data = x.vals[:len(x.vals):len(x.vals)]
	return nil
}

// data is an output's "data" as read: its leaves converted for the
// output's datatype (numbers into vals, strings into strs) up to the
// first that does not fit, whose text is bad; or, when it came before the
// datatype or shape, where its text is.
type data struct {
	seen, null bool
	done       bool // converted; else start:end is its text
	start, end int
	leaves     int64
	bad        []byte
	vals       []byte
	strs       [][]byte
}

// readData reads the first "data" member's value, starting with tok:
// converted as it is read when live and the output's datatype and shape
// are known, else only its place is kept.
func (d *decoder) readData(o *output, tok jsontext.Token, live bool) bool {
	r, x := d.r, &o.data
	if x.seen {
		return r.Skip(tok)
	}
	x.seen = true
	if tok.Kind == jsontext.NullValue {
		x.null = true
		return true
	}
	dt, ok := tensor.ParseV2(string(o.datatype.str))
	n, known := d.elements(o)
	if !live || o.datatype.kind != jsontext.String || !ok || !known {
		x.start = int(tok.Off)
		ok = r.Skip(tok)
		x.end = r.Pos()
		return ok
	}
	x.begin(dt, n, len(r.Text())-r.Pos())
	return leaves(r, x, tok, dt, n)
}

// elements returns the element count of a valid shape within the limit.
func (d *decoder) elements(o *output) (int64, bool) {
	if o.shape.kind != jsontext.Array || o.badDim != nil {
		return 0, false
	}
	n, err := tensor.NumElements(o.dims)
	return n, err == nil && n <= d.lim.MaxElements-d.total
}

// reread converts data whose text was only located.
func (d *decoder) reread(x *data, dt tensor.DataType, n int64) {
	r := pullPool.Get().(*jsontext.Pull)
	defer pullPool.Put(r)
	r.Reset(d.r.Text()[x.start:x.end], jsontext.Limits{MaxDepth: d.lim.MaxDepth})
	x.begin(dt, n, x.end-x.start)
	if tok, ok := r.Next(); ok {
		leaves(r, x, tok, dt, n)
	}
}

// begin sizes the lists for n elements, but for no more than room bytes
// of text can hold: a small body declaring a large shape allocates little.
func (x *data) begin(dt tensor.DataType, n int64, room int) {
	x.done = true
	if dt == tensor.Bytes {
		x.strs = make([][]byte, 0, min(n, int64(room/3+1)))
		return
	}
	x.vals = make([]byte, 0, min(n, int64(room/2+1))*int64(dt.Size()))
}

// leaves reads the value starting with tok, taking every non-array value
// under it in document order as one leaf (an object included).
func leaves(r *jsontext.Pull, x *data, tok jsontext.Token, dt tensor.DataType, n int64) bool {
	if tok.Kind != jsontext.BeginArray {
		return leaf(r, x, tok, dt, n)
	}
	for {
		e, ok := r.Next()
		switch {
		case !ok:
			return false
		case e.Kind == jsontext.EndArray:
			return true
		case e.Kind == jsontext.BeginArray:
			ok = leaves(r, x, e, dt, n)
		default:
			ok = leaf(r, x, e, dt, n)
		}
		if !ok {
			return false
		}
	}
}

// leaf reads one leaf, starting with tok.
func leaf(r *jsontext.Pull, x *data, tok jsontext.Token, dt tensor.DataType, n int64) bool {
	start := int(tok.Off)
	if tok.Kind == jsontext.BeginObject && !r.Skip(tok) {
		return false
	}
	x.leaves++
	raw := r.Text()[start:r.Pos()]
	switch {
	case x.bad != nil:
	case dt == tensor.Bytes && tok.Kind == jsontext.StringValue:
		x.strs = append(x.strs, own(tok))
	case dt == tensor.Bytes:
		x.bad = raw
	case x.leaves <= n:
		var ok bool
		if x.vals, ok = appendNumber(x.vals, dt, tok, raw); !ok {
			x.bad = raw
		}
	}
	return true
}

// appendNumber appends leaf tok (text raw) as an element of type dt.
func appendNumber(b []byte, dt tensor.DataType, tok jsontext.Token, raw []byte) ([]byte, bool) {
	num := tok.Num
	bits := 8 * dt.Size()
	switch dt {
	case tensor.Bool:
		switch {
		case tok.Kind == jsontext.TrueValue, num.IsUint64() && num.Uint64() == 1:
			return append(b, 1), true
		case tok.Kind == jsontext.FalseValue, num.IsUint64() && num.Uint64() == 0:
			return append(b, 0), true
		}
	case tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64:
		if u, ok := leafUint(tok, raw); ok && (bits == 64 || u < 1<<bits) {
			return appendUint(b, bits, u), true
		}
	case tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64:
		if x, ok := leafInt(tok, raw); ok && (bits == 64 || x >= -1<<(bits-1) && x < 1<<(bits-1)) {
			return appendUint(b, bits, uint64(x)), true
		}
	case tensor.FP32:
		if f, ok := leafFloat(tok, raw, 32); ok {
			return binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(f))), true
		}
	case tensor.FP64:
		if f, ok := leafFloat(tok, raw, 64); ok {
			return binary.LittleEndian.AppendUint64(b, math.Float64bits(f)), true
		}
	case tensor.FP16:
		if f, ok := leafFloat(tok, raw, 32); ok {
			return binary.LittleEndian.AppendUint16(b, float16.Fromfloat32(float32(f)).Bits()), true
		}
	case tensor.BF16:
		// Truncation, as tritonclient encodes BF16 (docs/open-inference-protocol.md §4).
		if f, ok := leafFloat(tok, raw, 32); ok {
			return binary.LittleEndian.AppendUint16(b, tensor.BF16FromFloat32(float32(f))), true
		}
	}
	return b, false
}

func appendUint(b []byte, bits int, u uint64) []byte {
	switch bits {
	case 8:
		return append(b, byte(u))
	case 16:
		return binary.LittleEndian.AppendUint16(b, uint16(u))
	case 32:
		return binary.LittleEndian.AppendUint32(b, uint32(u))
	}
	return binary.LittleEndian.AppendUint64(b, u)
}

// leafInt returns an integer leaf exactly; an integral double in int64
// range is accepted too.
func leafInt(tok jsontext.Token, raw []byte) (int64, bool) {
	if tok.Num.IsInt64() {
		return tok.Num.Int64(), true
	}
	if f, ok := integralDouble(tok, raw); ok && f >= -(1<<63) && f < 1<<63 {
		return int64(f), true
	}
	return 0, false
}

// leafUint is leafInt for unsigned values.
func leafUint(tok jsontext.Token, raw []byte) (uint64, bool) {
	if tok.Num.IsUint64() {
		return tok.Num.Uint64(), true
	}
	if f, ok := integralDouble(tok, raw); ok && f >= 0 && f < 1<<64 {
		return uint64(f), true
	}
	return 0, false
}

func integralDouble(tok jsontext.Token, raw []byte) (float64, bool) {
	if tok.Kind != jsontext.NumberValue || tok.Num.IsInt64() || tok.Num.IsUint64() {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f != math.Trunc(f) {
		return 0, false
	}
	return f, true
}

// leafFloat returns a float leaf rounded once to bits (32 or 64): integer
// tokens converted, other numbers (NaN and Infinity tokens included)
// parsed from their text, null as NaN.
func leafFloat(tok jsontext.Token, raw []byte, bits int) (float64, bool) {
	switch {
	case tok.Kind == jsontext.NullValue:
		return math.NaN(), true
	case tok.Num.IsInt64():
		return roundTo(float64(tok.Num.Int64()), raw, bits), true
	case tok.Num.IsUint64():
		return roundTo(float64(tok.Num.Uint64()), raw, bits), true
	case tok.Kind == jsontext.NumberValue:
		f, err := strconv.ParseFloat(string(raw), bits)
		if err != nil && !isRangeErr(err) {
			return 0, false
		}
		return f, true
	}
	return 0, false
}

// roundTo rounds an integer leaf to bits once: float64(int64) may already
// round, so large integers are re-read from their text at the target
// precision.
func roundTo(f float64, raw []byte, bits int) float64 {
	if math.Abs(f) < 1<<24 {
		return f
	}
	if g, err := strconv.ParseFloat(string(raw), bits); err == nil || isRangeErr(err) {
		return g
	}
	return f
}

// isRangeErr reports strconv's out-of-range error, whose value (±Inf or
// 0) is the right reading of a huge or tiny number.
func isRangeErr(err error) bool {
	return errors.Is(err, strconv.ErrRange)
}

func badValue(t *tensor.Tensor, raw []byte) error {
	return badResponse(nil, "output '%s' holds %s, not a valid %v value", clip(t.Name, 64), clip(string(raw), 32), t.DataType)
}

// decodeStrings finishes BYTES data. Strings without escapes alias the
// body; base64 strings are decoded into one arena allocated at its exact
// size.
func decodeStrings(t *tensor.Tensor, x *data, n int64, base64Data bool) error {
	if x.bad != nil {
		return badResponse(nil, "output '%s' holds %s, not a BYTES string", clip(t.Name, 64), clip(string(x.bad), 32))
	}
	leaves := x.leaves
	if leaves != n && (n == 0 || leaves == 0) {
		return badResponse(nil, "output '%s' has %d data elements, shape %v needs %d", clip(t.Name, 64), leaves, t.Shape, n)
	}
	if n == 0 {
		return nil
	}
	strs := x.strs
	if base64Data {
		arena := 0
		for _, s := range strs {
			arena += base64.StdEncoding.DecodedLen(len(s))
		}
		buf := make([]byte, 0, arena)
		for i, s := range strs {
			start := len(buf)
			var err error
			if buf, err = base64.StdEncoding.AppendDecode(buf, s); err != nil {
				return badResponse(err, "output '%s' holds invalid base64 data", clip(t.Name, 64))
			}
			strs[i] = buf[start:len(buf):len(buf)]
		}
	}
	if leaves != n {
		return splitFixedWidth(t, strs, n)
	}
	t.Strings = strs
	return nil
}

// splitFixedWidth undoes MLServer's concatenation of a fixed-width numpy
// bytes array: the strings, joined, must split into n equal widths; each
// element loses its trailing NUL padding, as numpy reads it.
func splitFixedWidth(t *tensor.Tensor, strs [][]byte, n int64) error {
	total := 0
	for _, s := range strs {
		total += len(s)
	}
	// Every element is at least one byte wide: an empty string cannot
	// stand for n elements (and n is then bounded by the body's size).
	if int64(total) < n || int64(total)%n != 0 {
		return badResponse(nil, "output '%s' has %d data elements, shape %v needs %d", clip(t.Name, 64), len(strs), t.Shape, n)
	}
	joined := strs[0]
	if len(strs) > 1 {
		joined = bytes.Join(strs, nil)
	}
	w := total / int(n)
	out := make([][]byte, n)
	for i := range out {
		e := joined[i*w : (i+1)*w : (i+1)*w]
		out[i] = bytes.TrimRight(e, "\x00")
	}
	t.Strings = out
	return nil
}
