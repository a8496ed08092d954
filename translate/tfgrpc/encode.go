package tfgrpc

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Encoding says how a TensorProto carries its values, as TF Serving's
// --enable_serialization_as_tensor_content flag chooses.
type Encoding uint8

const (
	// TypedFields is Tensor::AsProtoField, TF Serving's default: every
	// value in the dtype's typed field (float_val, int_val, string_val...),
	// which is what official clients read (outputs[k].float_val).
	TypedFields Encoding = iota
	// TensorContent is Tensor::AsProtoTensorContent: everything in
	// tensor_content, DT_STRING as TF's varint string list.
	TensorContent
)

// SizeTensorProto returns the encoded size of t as a TensorProto message
// (without a field header). t must be valid (tensor.Tensor.Validate).
func SizeTensorProto(t *tensor.Tensor, enc Encoding) int {
	n := sizeVarintField(uint64(DTypeOf(t.DataType)))
	n += sizeBytesField(sizeShape(t.Shape))
	switch v := valuesSize(t, enc); {
	case t.DataType == tensor.Bytes && enc == TypedFields:
		n += v // one string_val field per string, headers included
	case v > 0 && enc == TensorContent:
		n += sizeBytesField(v)
	case v > 0:
		// uint32_val (16) and uint64_val (17) take two tag bytes.
		n += protowire.SizeTag(typedField(t.DataType)) + protowire.SizeBytes(v)
	}
	return n
}

// AppendTensorProto appends t as a TensorProto message (without a field
// header): dtype, tensor_shape (always present, empty for a scalar) and
// the values, fields in number order as TF's C++ serializer writes them.
func AppendTensorProto(b []byte, t *tensor.Tensor, enc Encoding) []byte {
	b = appendVarintField(b, fTPDtype, uint64(DTypeOf(t.DataType)))
	b = appendLenField(b, fTPShape, sizeShape(t.Shape))
	for _, d := range t.Shape {
		if d == 0 {
			b = appendLenField(b, fShapeDim, 0)
			continue
		}
		b = appendLenField(b, fShapeDim, sizeVarintField(uint64(d)))
		b = appendVarintField(b, fDimSize, uint64(d))
	}
	if t.DataType == tensor.Bytes {
		if enc == TypedFields {
			for _, s := range t.Strings {
				b = appendBytesField(b, fTPStringVal, s)
			}
			return b
		}
		size := valuesSize(t, enc)
		if size == 0 {
			return b
		}
		b = appendLenField(b, fTPContent, size)
		for _, s := range t.Strings {
			b = protowire.AppendVarint(b, uint64(uint32(len(s))))
		}
		for _, s := range t.Strings {
			b = append(b, s...)
		}
		return b
	}
	size := valuesSize(t, enc)
	if size == 0 {
		return b
	}
	if enc == TensorContent {
		b = appendLenField(b, fTPContent, size)
		if t.DataType == tensor.Bool {
			return appendBools(b, t.Data)
		}
		return append(b, t.Data...)
	}
	b = appendLenField(b, typedField(t.DataType), size)
	switch t.DataType {
	case tensor.FP32, tensor.FP64:
		return append(b, t.Data...) // packed fixed32/fixed64 = the LE bytes
	case tensor.Bool:
		return appendBools(b, t.Data)
	}
	for i := range t.Len() {
		b = protowire.AppendVarint(b, typedValue(t, i))
	}
	return b
}

// appendBools appends BOOL bytes as 0 or 1.
func appendBools(b, d []byte) []byte {
	for _, c := range d {
		if c != 0 {
			c = 1
		}
		b = append(b, c)
	}
	return b
}

// sizeShape is the size of a TensorShapeProto holding shape.
func sizeShape(shape []int64) int {
	n := 0
	for _, d := range shape {
		if d == 0 {
			n += sizeBytesField(0)
		} else {
			n += sizeBytesField(sizeVarintField(uint64(d)))
		}
	}
	return n
}

// valuesSize is the payload size of the values: tensor_content's, the
// packed typed field's, or for typed strings all string_val fields.
func valuesSize(t *tensor.Tensor, enc Encoding) int {
	if t.DataType == tensor.Bytes {
		n := 0
		for _, s := range t.Strings {
			if enc == TypedFields {
				n += sizeBytesField(len(s))
			} else {
				n += protowire.SizeVarint(uint64(uint32(len(s)))) + len(s)
			}
		}
		return n
	}
	if enc == TensorContent {
		return len(t.Data)
	}
	switch t.DataType {
	case tensor.FP32, tensor.FP64, tensor.Bool:
		return len(t.Data) // fixed32, fixed64, one-byte varints
	}
	n := 0
	for i := range t.Len() {
		n += protowire.SizeVarint(typedValue(t, i))
	}
	return n
}

// typedValue is element i as its typed field's varint holds it: int8 and
// int16 sign-extended into an int32 (a negative int32 is a 10-byte
// varint), uint8, uint16 and half bits zero-extended.
func typedValue(t *tensor.Tensor, i int) uint64 {
	d := t.Data
	switch t.DataType {
	case tensor.Int8:
		return uint64(int64(int8(d[i])))
	case tensor.Uint8:
		return uint64(d[i])
	case tensor.Int16:
		return uint64(int64(int16(binary.LittleEndian.Uint16(d[2*i:]))))
	case tensor.Uint16, tensor.FP16, tensor.BF16:
		return uint64(binary.LittleEndian.Uint16(d[2*i:]))
	case tensor.Int32:
		return uint64(int64(int32(binary.LittleEndian.Uint32(d[4*i:]))))
	case tensor.Uint32:
		return uint64(binary.LittleEndian.Uint32(d[4*i:]))
	}
	return binary.LittleEndian.Uint64(d[8*i:])
}

// SizePredictResponse is the size AppendPredictResponse writes.
func SizePredictResponse(outputs []tensor.Tensor, spec ModelSpec, enc Encoding) int {
	total := sizeBytesField(sizeModelSpec(&spec))
	for i := range outputs {
		total += sizeBytesField(entrySize(outputs[i].Name, SizeTensorProto(&outputs[i], enc)))
	}
	return total
}

// AppendPredictResponse appends a PredictResponse: the outputs map (one
// entry per tensor, keyed by its Name, in the order given) and
// model_spec. Outputs must be valid tensors.
func AppendPredictResponse(b []byte, outputs []tensor.Tensor, spec ModelSpec, enc Encoding) []byte {
	total := sizeBytesField(sizeModelSpec(&spec))
	sizes := make([]int, len(outputs))
	for i := range outputs {
		sizes[i] = SizeTensorProto(&outputs[i], enc)
		total += sizeBytesField(entrySize(outputs[i].Name, sizes[i]))
	}
	b = growExact(b, total)
	for i := range outputs {
		b = appendLenField(b, fPredRespOutputs, entrySize(outputs[i].Name, sizes[i]))
		b = appendStringField(b, fMapKey, outputs[i].Name)
		b = appendLenField(b, fMapValue, sizes[i])
		b = AppendTensorProto(b, &outputs[i], enc)
	}
	return appendModelSpec(b, fPredRespSpec, &spec)
}

// entrySize is the size of a map entry with both key and value written,
// as protobuf writes map entries.
func entrySize(key string, value int) int {
	return sizeBytesField(len(key)) + sizeBytesField(value)
}

// growExact makes room for n more bytes.
func growExact(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}
