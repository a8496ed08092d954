// Package tensor defines tfsbridge's datatype table, its tensor
// representation and model signatures.
//
// Tensors hold their elements as little-endian row-major bytes, exactly the
// layout of a v2 binary tensor block, so a binary request body is produced
// and a binary response is consumed without boxing a single element.
package tensor

// DataType is a tensor element type. The zero value is Invalid.
type DataType uint8

// The datatypes shared by the Open Inference Protocol and TensorFlow.
const (
	Invalid DataType = iota
	Bool
	Uint8
	Uint16
	Uint32
	Uint64
	Int8
	Int16
	Int32
	Int64
	FP16
	FP32
	FP64
	BF16
	Bytes
	numDataTypes
)

// typeInfo is one row of the datatype table.
type typeInfo struct {
	v2     string // Open Inference Protocol name
	tf     string // TensorFlow DT_* name
	tfName string // the short name TF Serving prints in error messages
	triton string // Triton model-config TYPE_* name
	size   int    // bytes per element on the wire; 0 for BYTES
}

// table is the single source of truth for names and sizes.
var table = [numDataTypes]typeInfo{
	Invalid: {"", "DT_INVALID", "invalid", "TYPE_INVALID", 0},
	Bool:    {"BOOL", "DT_BOOL", "bool", "TYPE_BOOL", 1},
	Uint8:   {"UINT8", "DT_UINT8", "uint8", "TYPE_UINT8", 1},
	Uint16:  {"UINT16", "DT_UINT16", "uint16", "TYPE_UINT16", 2},
	Uint32:  {"UINT32", "DT_UINT32", "uint32", "TYPE_UINT32", 4},
	Uint64:  {"UINT64", "DT_UINT64", "uint64", "TYPE_UINT64", 8},
	Int8:    {"INT8", "DT_INT8", "int8", "TYPE_INT8", 1},
	Int16:   {"INT16", "DT_INT16", "int16", "TYPE_INT16", 2},
	Int32:   {"INT32", "DT_INT32", "int32", "TYPE_INT32", 4},
	Int64:   {"INT64", "DT_INT64", "int64", "TYPE_INT64", 8},
	FP16:    {"FP16", "DT_HALF", "half", "TYPE_FP16", 2},
	FP32:    {"FP32", "DT_FLOAT", "float", "TYPE_FP32", 4},
	FP64:    {"FP64", "DT_DOUBLE", "double", "TYPE_FP64", 8},
	BF16:    {"BF16", "DT_BFLOAT16", "bfloat16", "TYPE_BF16", 2},
	Bytes:   {"BYTES", "DT_STRING", "string", "TYPE_STRING", 0},
}

// String returns the v2 name ("FP32"), or "INVALID".
func (d DataType) String() string {
	if d == Invalid || d >= numDataTypes {
		return "INVALID"
	}
	return table[d].v2
}

// TFName returns the TensorFlow enum name ("DT_FLOAT").
func (d DataType) TFName() string { return d.info().tf }

// TFShortName returns the name TF Serving uses in messages ("float", "half").
func (d DataType) TFShortName() string { return d.info().tfName }

// Size returns the bytes per element in the binary wire format; 0 for BYTES
// (variable length) and Invalid.
func (d DataType) Size() int { return d.info().size }

// Valid reports whether d is one of the known datatypes.
func (d DataType) Valid() bool { return d > Invalid && d < numDataTypes }

func (d DataType) info() typeInfo {
	if d >= numDataTypes {
		return table[Invalid]
	}
	return table[d]
}

// ParseV2 maps a v2 datatype name ("FP32") to a DataType. Names are
// case-sensitive, as Triton and MLServer treat them.
func ParseV2(name string) (DataType, bool) {
	for d := Bool; d < numDataTypes; d++ {
		if table[d].v2 == name {
			return d, true
		}
	}
	return Invalid, false
}

// ParseTF maps a TensorFlow DT_* name to a DataType.
func ParseTF(name string) (DataType, bool) {
	for d := Bool; d < numDataTypes; d++ {
		if table[d].tf == name {
			return d, true
		}
	}
	return Invalid, false
}

// ParseTriton maps a Triton model-config TYPE_* name to a DataType.
func ParseTriton(name string) (DataType, bool) {
	for d := Bool; d < numDataTypes; d++ {
		if table[d].triton == name {
			return d, true
		}
	}
	return Invalid, false
}
