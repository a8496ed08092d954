package tfgrpc

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// DType is a tensorflow.DataType enum value (types.proto).
type DType int32

// The DataType values tfsbridge maps to v2 datatypes (types.proto).
const (
	DTInvalid  DType = 0
	DTFloat    DType = 1
	DTDouble   DType = 2
	DTInt32    DType = 3
	DTUint8    DType = 4
	DTInt16    DType = 5
	DTInt8     DType = 6
	DTString   DType = 7
	DTInt64    DType = 9
	DTBool     DType = 10
	DTBfloat16 DType = 14
	DTUint16   DType = 17
	DTHalf     DType = 19
	DTUint32   DType = 22
	DTUint64   DType = 23
	// dtMax is the last value TF's CASES macro accepts (DT_FLOAT4_E2M1FN).
	dtMax DType = 33
)

// dtypes maps the enum to the datatype table; Invalid for the types v2
// has no name for.
var dtypes = map[DType]tensor.DataType{
	DTFloat: tensor.FP32, DTDouble: tensor.FP64, DTInt32: tensor.Int32, DTUint8: tensor.Uint8,
	DTInt16: tensor.Int16, DTInt8: tensor.Int8, DTString: tensor.Bytes, DTInt64: tensor.Int64,
	DTBool: tensor.Bool, DTBfloat16: tensor.BF16, DTUint16: tensor.Uint16, DTHalf: tensor.FP16,
	DTUint32: tensor.Uint32, DTUint64: tensor.Uint64,
}

// DTypeKind says what a DataType enum value is to tfsbridge.
type DTypeKind uint8

const (
	// DTypeBad is DT_INVALID, a _REF type or a value TF does not define:
	// Tensor::FromProto fails ("tensor parsing error").
	DTypeBad DTypeKind = iota
	// DTypeNoV2 is a type TF reads (complex, quantized, resource,
	// variant, float8, int4, ...) that v2 has no datatype for.
	DTypeNoV2
	// DTypeOK maps to a v2 datatype.
	DTypeOK
)

// Lookup maps a DataType enum value to the datatype table.
func Lookup(d DType) (tensor.DataType, DTypeKind) {
	if dt, ok := dtypes[d]; ok {
		return dt, DTypeOK
	}
	if d > DTInvalid && d <= dtMax {
		return tensor.Invalid, DTypeNoV2
	}
	return tensor.Invalid, DTypeBad
}

// DTypeOf is the DataType enum value of a datatype (DT_INVALID for
// tensor.Invalid).
func DTypeOf(dt tensor.DataType) DType {
	for d, t := range dtypes {
		if t == dt {
			return d
		}
	}
	return DTInvalid
}

// TensorProto field numbers (tensor.proto).
const (
	fTPDtype         protowire.Number = 1
	fTPShape         protowire.Number = 2
	fTPContent       protowire.Number = 4
	fTPFloatVal      protowire.Number = 5
	fTPDoubleVal     protowire.Number = 6
	fTPIntVal        protowire.Number = 7
	fTPStringVal     protowire.Number = 8
	fTPInt64Val      protowire.Number = 10
	fTPBoolVal       protowire.Number = 11
	fTPHalfVal       protowire.Number = 13
	fTPUint32Val     protowire.Number = 16
	fTPUint64Val     protowire.Number = 17
	fShapeDim        protowire.Number = 2
	fDimSize         protowire.Number = 1
	fDimName         protowire.Number = 2
	maxRank                           = 254 // TensorShape::MaxDimensions
	fInt64ValueValue protowire.Number = 1   // google.protobuf.Int64Value.value
)

// typedField is the TensorProto field TF reads dt's values from when
// tensor_content is empty, and writes them to in AsProtoField (docs/grpc.md §6.2).
func typedField(dt tensor.DataType) protowire.Number {
	switch dt {
	case tensor.FP32:
		return fTPFloatVal
	case tensor.FP64:
		return fTPDoubleVal
	case tensor.Int32, tensor.Int16, tensor.Int8, tensor.Uint8, tensor.Uint16:
		return fTPIntVal
	case tensor.Int64:
		return fTPInt64Val
	case tensor.Uint32:
		return fTPUint32Val
	case tensor.Uint64:
		return fTPUint64Val
	case tensor.Bool:
		return fTPBoolVal
	case tensor.FP16, tensor.BF16:
		return fTPHalfVal
	case tensor.Bytes:
		return fTPStringVal
	}
	return 0
}

// elemWire is the wire type of one element of dt's typed field.
func elemWire(dt tensor.DataType) protowire.Type {
	switch dt {
	case tensor.FP32:
		return protowire.Fixed32Type
	case tensor.FP64:
		return protowire.Fixed64Type
	case tensor.Bytes:
		return protowire.BytesType
	}
	return protowire.VarintType
}
