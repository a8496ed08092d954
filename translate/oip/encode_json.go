package oip

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/x448/float16"
)

// encodeJSON writes a JSON-only request body for MLServer, which has no
// binary extension (docs/open-inference-protocol.md §1, §5.4):
//
//   - numbers in a flat "data" list: integers exactly (64-bit included),
//     floats in the shortest form that reads back as the same value at the
//     tensor's precision (FP16 as the shortest float32 text of the half
//     value, since MLServer takes FP16 only as JSON numbers);
//   - NaN as null: MLServer parses requests with orjson, which rejects
//     NaN/Infinity tokens (orjson test_nan_loads), while numpy turns None
//     into NaN for float dtypes (and MLServer itself writes NaN as null).
//     ±Infinity has no such spelling, so it is a 400 rather than a silent
//     change of value;
//   - BOOL as true/false; BYTES as JSON strings when every element of the
//     input is valid UTF-8, else all elements base64 with the input
//     parameter content_type "base64" (MLServer's Base64Codec);
//   - BF16 is refused: MLServer's datatype enum has no BF16 (422).
//
// Shapes are sent as they are, rank 0 included: MLServer reshapes with
// numpy, for which [] is one element.
//
// The body is built in a pooled scratch and copied once into an
// allocation of its exact size. data gives the tensors' data in pieces as
// for EncodeRequestParts; nil reads their Data.
func encodeJSON(dst []byte, inputs []tensor.Tensor, data func(int) [][]byte, opt EncodeOptions) ([]byte, int, string, error) {
	est := 64 + len(opt.ID)
	for i := range inputs {
		t := &inputs[i]
		pieces := piecesOf(data, inputs, i)
		if err := checkData(t, pieces); err != nil {
			return dst, 0, "", err
		}
		if t.DataType == tensor.BF16 {
			return dst, 0, "", unsupportedBF16(t, MLServer)
		}
		est += 96 + len(t.Name) + 21*len(t.Shape) + jsonDataEstimate(t, blockSize(t, pieces))
	}
	sp := getScratch()
	buf := (*sp)[:0]
	if cap(buf) < est {
		buf = make([]byte, 0, est)
	}
	buf = appendBodyStart(buf, opt.ID)
	for i := range inputs {
		t := &inputs[i]
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendInputHead(buf, t, false)
		var err error
		if buf, err = appendJSONData(buf, t, piecesOf(data, inputs, i)); err != nil {
			putScratch(sp, buf)
			return dst, 0, "", err
		}
		buf = append(buf, '}')
	}
	buf = append(buf, "]}"...)

	if cap(dst)-len(dst) < len(buf) {
		grown := make([]byte, len(dst), len(dst)+len(buf))
		copy(grown, dst)
		dst = grown
	}
	dst = append(dst, buf...)
	putScratch(sp, buf)
	return dst, -1, ContentTypeJSON, nil
}

// jsonDataEstimate is an upper bound of the JSON text of t's elements for
// fixed types (so the scratch grows once), and a close guess for BYTES;
// size is the tensor's binary block size (blockSize).
func jsonDataEstimate(t *tensor.Tensor, size int) int {
	if t.DataType == tensor.Bytes {
		// Each string's bytes and 4 more: its quotes, a comma, one to spare.
		return size
	}
	n := size / t.DataType.Size()
	switch t.DataType {
	case tensor.Bool:
		return 6 * n
	case tensor.Uint8, tensor.Int8:
		return 5 * n
	case tensor.Uint16, tensor.Int16, tensor.FP16:
		return 16 * n
	case tensor.Uint32, tensor.Int32, tensor.FP32:
		return 17 * n
	}
	return 25 * n
}

// appendJSONData appends `,"data":[…]` and, for base64 BYTES,
// `,"parameters":{"content_type":"base64"}`; pieces are t's data as for
// appendBlock.
func appendJSONData(dst []byte, t *tensor.Tensor, pieces [][]byte) ([]byte, error) {
	if t.DataType == tensor.Bytes {
		return appendJSONStrings(dst, t), nil
	}
	if pieces == nil {
		pieces = [][]byte{t.Data}
	}
	dst = append(dst, `,"data":[`...)
	first := true
	for _, d := range pieces {
		var err error
		if dst, err = appendJSONNumbers(dst, t, d, first); err != nil {
			return dst, err
		}
		first = first && len(d) == 0
	}
	return append(dst, ']'), nil
}

// appendJSONNumbers appends the elements in d (whole elements of t's
// datatype) as JSON values, comma-separated; first says no value precedes.
func appendJSONNumbers(dst []byte, t *tensor.Tensor, d []byte, first bool) ([]byte, error) {
	n := len(d) / t.DataType.Size()
	for i := 0; i < n; i++ {
		if i > 0 || !first {
			dst = append(dst, ',')
		}
		switch t.DataType {
		case tensor.Bool:
			if d[i] != 0 {
				dst = append(dst, "true"...)
			} else {
				dst = append(dst, "false"...)
			}
		case tensor.Uint8:
			dst = strconv.AppendUint(dst, uint64(d[i]), 10)
		case tensor.Int8:
			dst = strconv.AppendInt(dst, int64(int8(d[i])), 10)
		case tensor.Uint16:
			dst = strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint16(d[2*i:])), 10)
		case tensor.Int16:
			dst = strconv.AppendInt(dst, int64(int16(binary.LittleEndian.Uint16(d[2*i:]))), 10)
		case tensor.Uint32:
			dst = strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint32(d[4*i:])), 10)
		case tensor.Int32:
			dst = strconv.AppendInt(dst, int64(int32(binary.LittleEndian.Uint32(d[4*i:]))), 10)
		case tensor.Uint64:
			dst = strconv.AppendUint(dst, binary.LittleEndian.Uint64(d[8*i:]), 10)
		case tensor.Int64:
			dst = strconv.AppendInt(dst, int64(binary.LittleEndian.Uint64(d[8*i:])), 10)
		case tensor.FP16:
			f := float16.Frombits(binary.LittleEndian.Uint16(d[2*i:])).Float32()
			var ok bool
			if dst, ok = appendJSONFloat(dst, float64(f), 32); !ok {
				return dst, infinityForMLServer(t)
			}
		case tensor.FP32:
			f := math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
			var ok bool
			if dst, ok = appendJSONFloat(dst, float64(f), 32); !ok {
				return dst, infinityForMLServer(t)
			}
		case tensor.FP64:
			f := math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:]))
			var ok bool
			if dst, ok = appendJSONFloat(dst, f, 64); !ok {
				return dst, infinityForMLServer(t)
			}
		}
	}
	return dst, nil
}

// appendJSONFloat appends v in shortest round-trip form for its precision,
// NaN as null; it reports false for ±Infinity. Integral values get ".0":
// Python's JSON parsers read "-0" as the integer 0, losing the sign of a
// negative zero, while "-0.0" stays a float.
func appendJSONFloat(dst []byte, v float64, bits int) ([]byte, bool) {
	switch {
	case math.IsNaN(v):
		return append(dst, "null"...), true
	case math.IsInf(v, 0):
		return dst, false
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, v, 'g', -1, bits)
	for _, c := range dst[start:] {
		if c == '.' || c == 'e' {
			return dst, true
		}
	}
	return append(dst, '.', '0'), true
}

func infinityForMLServer(t *tensor.Tensor) error {
	return apierr.InvalidArgumentf("input '%s' holds an infinite value, which cannot be sent to the MLServer server: its JSON parser rejects non-finite numbers", t.Name)
}

// appendJSONStrings appends a BYTES input's data as strings, or as base64
// with content_type "base64" when any element is not valid UTF-8 (JSON
// strings are Unicode text; MLServer's Base64Codec decodes the rest).
func appendJSONStrings(dst []byte, t *tensor.Tensor) []byte {
	text := true
	for _, s := range t.Strings {
		if !utf8.Valid(s) {
			text = false
			break
		}
	}
	if !text {
		dst = append(dst, `,"parameters":{"content_type":"base64"}`...)
	}
	dst = append(dst, `,"data":[`...)
	for i, s := range t.Strings {
		if i > 0 {
			dst = append(dst, ',')
		}
		if text {
			dst = jsontext.AppendString(dst, s)
		} else {
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, s)
			dst = append(dst, '"')
		}
	}
	return append(dst, ']')
}
