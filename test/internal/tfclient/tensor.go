// Package tfclient is a TF Serving gRPC client for tests: it builds requests the way
// Python's tensorflow-serving-api and tf.make_tensor_proto put them on the wire (spec
// grpc.md §7), sends them over a real HTTP/2 gRPC connection and decodes the answers with
// TF Serving's message layout. It is written from the published .proto field numbers with
// protowire, independently of tfsbridge's own wire code (translate/tfgrpc), so that a test
// using it checks the translation against a second reading of the protocol.
//
//	c, err := tfclient.Dial("127.0.0.1:8500")
//	defer c.Close()
//	req := tfclient.PredictRequest(tfclient.Spec("half_plus_two"),
//		map[string]tfclient.TensorProto{"x": tfclient.Float32([]int64{3}, 1, 2, 5)})
//	resp, err := c.Predict(ctx, req)          // *PredictResponse, or a gRPC status error
//	ys := resp.Outputs["y"].FloatVal          // [2.5 3 4.5]
package tfclient

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// DType is tensorflow.DataType.
type DType int32

// The DataType values tests use (tensorflow/core/framework/types.proto).
const (
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
)

// TensorProto is a tensorflow.TensorProto. Marshal writes the set fields in field-number
// order with packed repeated scalars, as protobuf's Python and C++ serializers do; Shape
// nil with Scalar false writes no tensor_shape at all.
type TensorProto struct {
	DType DType
	// Shape is tensor_shape.dim[].size. An empty (non-nil) slice is a scalar: an empty
	// tensor_shape message, as make_tensor_proto sends it.
	Shape         []int64
	TensorContent []byte
	FloatVal      []float32
	DoubleVal     []float64
	IntVal        []int32
	StringVal     [][]byte
	Int64Val      []int64
	BoolVal       []bool
	HalfVal       []int32
	Uint32Val     []uint32
	Uint64Val     []uint64
}

// TensorProto field numbers (tensor.proto).
const (
	fDType     = 1
	fShape     = 2
	fContent   = 4
	fFloatVal  = 5
	fDoubleVal = 6
	fIntVal    = 7
	fStringVal = 8
	fInt64Val  = 10
	fBoolVal   = 11
	fHalfVal   = 13
	fUint32Val = 16
	fUint64Val = 17
)

// Marshal serializes t.
func (t TensorProto) Marshal() []byte {
	var b []byte
	if t.DType != 0 {
		b = protowire.AppendTag(b, fDType, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(t.DType))
	}
	if t.Shape != nil {
		var shape []byte
		for _, d := range t.Shape {
			var dim []byte
			if d != 0 {
				dim = protowire.AppendTag(dim, 1, protowire.VarintType)
				dim = protowire.AppendVarint(dim, uint64(d))
			}
			shape = appendBytes(shape, 2, dim)
		}
		b = appendBytes(b, fShape, shape)
	}
	if len(t.TensorContent) > 0 {
		b = appendBytes(b, fContent, t.TensorContent)
	}
	b = appendPacked(b, fFloatVal, t.FloatVal, func(p []byte, v float32) []byte { return protowire.AppendFixed32(p, math.Float32bits(v)) })
	b = appendPacked(b, fDoubleVal, t.DoubleVal, func(p []byte, v float64) []byte { return protowire.AppendFixed64(p, math.Float64bits(v)) })
	b = appendPacked(b, fIntVal, t.IntVal, func(p []byte, v int32) []byte { return protowire.AppendVarint(p, uint64(int64(v))) })
	for _, s := range t.StringVal {
		b = appendBytes(b, fStringVal, s)
	}
	b = appendPacked(b, fInt64Val, t.Int64Val, func(p []byte, v int64) []byte { return protowire.AppendVarint(p, uint64(v)) })
	b = appendPacked(b, fBoolVal, t.BoolVal, func(p []byte, v bool) []byte { return protowire.AppendVarint(p, protowire.EncodeBool(v)) })
	b = appendPacked(b, fHalfVal, t.HalfVal, func(p []byte, v int32) []byte { return protowire.AppendVarint(p, uint64(int64(v))) })
	b = appendPacked(b, fUint32Val, t.Uint32Val, func(p []byte, v uint32) []byte { return protowire.AppendVarint(p, uint64(v)) })
	b = appendPacked(b, fUint64Val, t.Uint64Val, func(p []byte, v uint64) []byte { return protowire.AppendVarint(p, v) })
	return b
}

// NumElements is the product of Shape (1 for a scalar).
func (t TensorProto) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// --- make_tensor_proto ---
//
// make_tensor_proto puts a numpy array of more than one element of a fixed-width numeric
// type (bool, uint16 and strings excepted) into tensor_content, little-endian; a scalar or
// one-element array goes into the typed field. shape nil means a scalar. Values shorter
// than the shape (make_tensor_proto's shape= padding) go into the typed field, which TF
// broadcasts with its last value.

// useContent is make_tensor_proto's choice between tensor_content and the typed field.
func useContent(shape []int64, n int) bool {
	t := TensorProto{Shape: shape}
	return n > 1 && int64(n) == t.NumElements()
}

func scalarShape(shape []int64) []int64 {
	if shape == nil {
		return []int64{}
	}
	return shape
}

// Float32 is make_tensor_proto(np.array(vs, np.float32).reshape(shape)) (DT_FLOAT).
func Float32(shape []int64, vs ...float32) TensorProto {
	t := TensorProto{DType: DTFloat, Shape: scalarShape(shape)}
	if useContent(t.Shape, len(vs)) {
		for _, v := range vs {
			t.TensorContent = protowire.AppendFixed32(t.TensorContent, math.Float32bits(v))
		}
		return t
	}
	t.FloatVal = vs
	return t
}

// Float64 is make_tensor_proto of a float64 numpy array (DT_DOUBLE: numpy's default float,
// the classic "Expects arg[0] to be float but double is provided").
func Float64(shape []int64, vs ...float64) TensorProto {
	t := TensorProto{DType: DTDouble, Shape: scalarShape(shape)}
	if useContent(t.Shape, len(vs)) {
		for _, v := range vs {
			t.TensorContent = protowire.AppendFixed64(t.TensorContent, math.Float64bits(v))
		}
		return t
	}
	t.DoubleVal = vs
	return t
}

// Int32 is make_tensor_proto of an int32 array (DT_INT32; Python ints become int32 when
// they fit).
func Int32(shape []int64, vs ...int32) TensorProto {
	t := TensorProto{DType: DTInt32, Shape: scalarShape(shape)}
	if useContent(t.Shape, len(vs)) {
		for _, v := range vs {
			t.TensorContent = protowire.AppendFixed32(t.TensorContent, uint32(v))
		}
		return t
	}
	t.IntVal = vs
	return t
}

// Int64 is make_tensor_proto of an int64 array (DT_INT64).
func Int64(shape []int64, vs ...int64) TensorProto {
	t := TensorProto{DType: DTInt64, Shape: scalarShape(shape)}
	if useContent(t.Shape, len(vs)) {
		for _, v := range vs {
			t.TensorContent = protowire.AppendFixed64(t.TensorContent, uint64(v))
		}
		return t
	}
	t.Int64Val = vs
	return t
}

// Bool is make_tensor_proto of a bool array: always bool_val (bool is not a
// tensor_content type).
func Bool(shape []int64, vs ...bool) TensorProto {
	return TensorProto{DType: DTBool, Shape: scalarShape(shape), BoolVal: vs}
}

// Strings is make_tensor_proto of a bytes/str array: always string_val.
func Strings(shape []int64, vs ...string) TensorProto {
	t := TensorProto{DType: DTString, Shape: scalarShape(shape)}
	for _, v := range vs {
		t.StringVal = append(t.StringVal, []byte(v))
	}
	return t
}

// --- wire helpers ---

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendString(b []byte, num protowire.Number, v string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

func appendPacked[T any](b []byte, num protowire.Number, vs []T, one func([]byte, T) []byte) []byte {
	if len(vs) == 0 {
		return b
	}
	var p []byte
	for _, v := range vs {
		p = one(p, v)
	}
	return appendBytes(b, num, p)
}
