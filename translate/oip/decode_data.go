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
func decodeData(t *tensor.Tensor, o jsontext.Value, n int64, base64Data bool) error {
	data, ok := o.Member("data")
	if !ok || data.Kind() == jsontext.Null {
		if n == 0 {
			return nil
		}
		return badResponse(nil, "output '%s' has neither data nor binary_data_size", clip(t.Name, 64))
	}
	leaves := countLeaves(data)
	if t.DataType == tensor.Bytes {
		return decodeStrings(t, data, n, leaves, base64Data)
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
	walkLeaves(data, func(v jsontext.Value) bool {
		err = putNumber(t, i, v)
		i++
		return err == nil
	})
	return err
}

// countLeaves counts the non-array values under v (1 for a scalar).
func countLeaves(v jsontext.Value) int {
	if v.Kind() != jsontext.Array {
		return 1
	}
	c := 0
	for _, e := range v.Elems() {
		c += countLeaves(e)
	}
	return c
}

// walkLeaves calls f for every non-array value under v in document order
// until f returns false. Nesting is bounded by the reader's depth limit.
func walkLeaves(v jsontext.Value, f func(jsontext.Value) bool) bool {
	if v.Kind() != jsontext.Array {
		return f(v)
	}
	for _, e := range v.Elems() {
		if !walkLeaves(e, f) {
			return false
		}
	}
	return true
}

// putNumber stores leaf v as element i of fixed-size tensor t.
func putNumber(t *tensor.Tensor, i int, v jsontext.Value) error {
	d := t.Data
	switch t.DataType {
	case tensor.Bool:
		switch {
		case v.Kind() == jsontext.True, v.Num().IsUint64() && v.Num().Uint64() == 1:
			d[i] = 1
		case v.Kind() == jsontext.False, v.Num().IsUint64() && v.Num().Uint64() == 0:
			d[i] = 0
		default:
			return badValue(t, v)
		}
	case tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64:
		u, ok := leafUint(v)
		bits := 8 * t.DataType.Size()
		if !ok || (bits < 64 && u >= 1<<bits) {
			return badValue(t, v)
		}
		putUint(d, i, bits, u)
	case tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64:
		x, ok := leafInt(v)
		bits := 8 * t.DataType.Size()
		if !ok || (bits < 64 && (x < -1<<(bits-1) || x >= 1<<(bits-1))) {
			return badValue(t, v)
		}
		putUint(d, i, bits, uint64(x))
	case tensor.FP32:
		f, ok := leafFloat(v, 32)
		if !ok {
			return badValue(t, v)
		}
		binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(float32(f)))
	case tensor.FP64:
		f, ok := leafFloat(v, 64)
		if !ok {
			return badValue(t, v)
		}
		binary.LittleEndian.PutUint64(d[8*i:], math.Float64bits(f))
	case tensor.FP16:
		f, ok := leafFloat(v, 32)
		if !ok {
			return badValue(t, v)
		}
		binary.LittleEndian.PutUint16(d[2*i:], float16.Fromfloat32(float32(f)).Bits())
	case tensor.BF16:
		f, ok := leafFloat(v, 32)
		if !ok {
			return badValue(t, v)
		}
		// Truncation, as tritonclient encodes BF16 (docs/open-inference-protocol.md §4).
		binary.LittleEndian.PutUint16(d[2*i:], tensor.BF16FromFloat32(float32(f)))
	default:
		return badValue(t, v)
	}
	return nil
}

func putUint(d []byte, i, bits int, u uint64) {
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

// leafInt returns an integer leaf exactly; an integral double in int64
// range is accepted too.
func leafInt(v jsontext.Value) (int64, bool) {
	if v.Num().IsInt64() {
		return v.Num().Int64(), true
	}
	if f, ok := integralDouble(v); ok && f >= -(1<<63) && f < 1<<63 {
		return int64(f), true
	}
	return 0, false
}

// leafUint is leafInt for unsigned values.
func leafUint(v jsontext.Value) (uint64, bool) {
	if v.Num().IsUint64() {
		return v.Num().Uint64(), true
	}
	if f, ok := integralDouble(v); ok && f >= 0 && f < 1<<64 {
		return uint64(f), true
	}
	return 0, false
}

func integralDouble(v jsontext.Value) (float64, bool) {
	if !v.IsNumber() || v.Num().IsInt64() || v.Num().IsUint64() {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v.Raw()), 64)
	if err != nil || f != math.Trunc(f) {
		return 0, false
	}
	return f, true
}

// leafFloat returns a float leaf rounded once to bits (32 or 64): integer
// tokens converted, other numbers (NaN and Infinity tokens included)
// parsed from their text, null as NaN.
func leafFloat(v jsontext.Value, bits int) (float64, bool) {
	switch {
	case v.Kind() == jsontext.Null:
		return math.NaN(), true
	case v.Num().IsInt64():
		return roundTo(float64(v.Num().Int64()), v, bits), true
	case v.Num().IsUint64():
		return roundTo(float64(v.Num().Uint64()), v, bits), true
	case v.IsNumber():
		f, err := strconv.ParseFloat(string(v.Raw()), bits)
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
func roundTo(f float64, v jsontext.Value, bits int) float64 {
	if math.Abs(f) < 1<<24 {
		return f
	}
	if g, err := strconv.ParseFloat(string(v.Raw()), bits); err == nil || isRangeErr(err) {
		return g
	}
	return f
}

// isRangeErr reports strconv's out-of-range error, whose value (±Inf or
// 0) is the right reading of a huge or tiny number.
func isRangeErr(err error) bool {
	return errors.Is(err, strconv.ErrRange)
}

func badValue(t *tensor.Tensor, v jsontext.Value) error {
	return badResponse(nil, "output '%s' holds %s, not a valid %v value", clip(t.Name, 64), clip(string(v.Raw()), 32), t.DataType)
}

// decodeStrings reads BYTES data. Strings without escapes alias the body;
// escaped and base64 strings are decoded into one arena allocated at its
// exact size after a first pass.
func decodeStrings(t *tensor.Tensor, data jsontext.Value, n int64, leaves int, base64Data bool) error {
	arena := 0
	var err error
	walkLeaves(data, func(v jsontext.Value) bool {
		if v.Kind() != jsontext.String {
			err = badResponse(nil, "output '%s' holds %s, not a BYTES string", clip(t.Name, 64), clip(string(v.Raw()), 32))
			return false
		}
		switch {
		case base64Data:
			arena += base64.StdEncoding.DecodedLen(len(v.Str()))
		case escaped(v):
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
	walkLeaves(data, func(v jsontext.Value) bool {
		s := v.Str()
		switch {
		case base64Data:
			start := len(buf)
			if buf, err = base64.StdEncoding.AppendDecode(buf, s); err != nil {
				err = badResponse(err, "output '%s' holds invalid base64 data", clip(t.Name, 64))
				return false
			}
			s = buf[start:len(buf):len(buf)]
		case escaped(v):
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

// escaped reports a string leaf whose contents differ from its text, so
// Str points into the document's pooled memory and must be copied.
func escaped(v jsontext.Value) bool { return len(v.Raw()) != len(v.Str())+2 }

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
