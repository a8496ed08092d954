package tfrequest

import (
	"encoding/binary"
	"math"

	"github.com/x448/float16"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// leafResult is what appendLeaf made of one non-string leaf.
type leafResult uint8

const (
	leafOK            leafResult = iota
	leafTypeError                // TF's TypeError
	leafUnimplemented            // a dtype TF cannot fill from JSON
)

// appendLeaf is AddValueToTensor for every dtype but strings: it appends
// the little-endian element a JSON number (k == jsontext.Number, n its
// value) or literal (another k) makes for dt, for the decoder and the
// tests' tape oracle alike, bit for bit.
func appendLeaf(d []byte, dt tensor.DataType, k jsontext.Kind, n jsontext.Num) ([]byte, leafResult) {
	isNum := k == jsontext.Number
	switch dt {
	case tensor.FP32, tensor.FP64, tensor.FP16, tensor.BF16:
		if !isNum {
			return d, leafTypeError
		}
		f := n.Float64()
		switch dt {
		case tensor.FP32:
			return binary.LittleEndian.AppendUint32(d, math.Float32bits(float32(f))), leafOK
		case tensor.FP64:
			return binary.LittleEndian.AppendUint64(d, math.Float64bits(f)), leafOK
		case tensor.FP16:
			// Deliberate departure (DESIGN): TF Serving cannot fill a
			// DT_HALF from JSON; v2 models declare FP16 inputs.
			return binary.LittleEndian.AppendUint16(d, float16.Fromfloat32(float32(f)).Bits()), leafOK
		default:
			return binary.LittleEndian.AppendUint16(d, tensor.BF16FromFloat32(float32(f))), leafOK
		}
	case tensor.Int32, tensor.Int16, tensor.Int8, tensor.Uint8:
		// TF only requires an int32 and narrows with a C++ cast (wraps).
		if !isNum || !n.IsInt() {
			return d, leafTypeError
		}
		x := int32(n.Int64())
		switch dt {
		case tensor.Int32:
			return binary.LittleEndian.AppendUint32(d, uint32(x)), leafOK
		case tensor.Int16:
			return binary.LittleEndian.AppendUint16(d, uint16(x)), leafOK
		default:
			return append(d, byte(x)), leafOK
		}
	case tensor.Int64:
		if !isNum || !n.IsInt64() {
			return d, leafTypeError
		}
		return binary.LittleEndian.AppendUint64(d, uint64(n.Int64())), leafOK
	case tensor.Uint32, tensor.Uint16:
		// UINT16 is tfsbridge's extension, range-checked like uint32 and
		// narrowed like TF narrows uint8.
		if !isNum || !n.IsUint() {
			return d, leafTypeError
		}
		if dt == tensor.Uint32 {
			return binary.LittleEndian.AppendUint32(d, uint32(n.Uint64())), leafOK
		}
		return binary.LittleEndian.AppendUint16(d, uint16(n.Uint64())), leafOK
	case tensor.Uint64:
		if !isNum || !n.IsUint64() {
			return d, leafTypeError
		}
		return binary.LittleEndian.AppendUint64(d, n.Uint64()), leafOK
	case tensor.Bool:
		switch k {
		case jsontext.True:
			return append(d, 1), leafOK
		case jsontext.False:
			return append(d, 0), leafOK
		}
		return d, leafTypeError
	}
	return d, leafUnimplemented
}
