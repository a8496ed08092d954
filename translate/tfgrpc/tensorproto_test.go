package tfgrpc

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tfsbridge/tfsbridge/translate/internal/grpcproto"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// raw decodes a TensorProto and returns its datatype, shape and v2 raw
// contents, or the error of the first step that failed.
func raw(t testing.TB, msg []byte) (tensor.DataType, []int64, []byte, error) {
	t.Helper()
	tp, err := DecodeTensorProto(msg)
	if err != nil {
		return 0, nil, nil, err
	}
	dt, n, err := tp.Check()
	if err != nil {
		return 0, nil, nil, err
	}
	size, err := tp.RawSize(dt, n)
	if err != nil {
		return 0, nil, nil, err
	}
	out := tp.AppendRaw(nil, dt, n)
	if int64(len(out)) != size {
		t.Fatalf("AppendRaw wrote %d bytes, RawSize said %d", len(out), size)
	}
	return dt, tp.Shape, out, nil
}

// tpMsg builds a TensorProto with the protobuf runtime, as a generated
// client (tensorflow-serving-api's Python classes) would.
func tpMsg(t testing.TB, dtype int32, dims []int64, set func(m protoreflect.Message)) []byte {
	t.Helper()
	return grpcproto.Marshal(grpcproto.TensorProto(dtype, dims, set))
}

var appendVals = grpcproto.Values

func f32s(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func f64s(vs ...float64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func i32v(vs ...int32) []protoreflect.Value {
	out := make([]protoreflect.Value, len(vs))
	for i, v := range vs {
		out[i] = protoreflect.ValueOfInt32(v)
	}
	return out
}

func TestMakeTensorProtoWireBytes(t *testing.T) {
	// docs/grpc.md §7: the bytes tf.make_tensor_proto produces.
	tests := []struct {
		name  string
		wire  string
		dt    tensor.DataType
		shape []int64
		raw   []byte
	}{
		{"float32 array", "08 01 12 08 12 02 08 01 12 02 08 02 22 08 00 00 80 3f 00 00 00 40", tensor.FP32, []int64{1, 2}, f32s(1, 2)},
		{"python float scalar", "08 01 12 00 2a 04 00 00 40 40", tensor.FP32, nil, f32s(3)},
		{"strings", "08 07 12 04 12 02 08 02 42 02 61 62 42 01 63", tensor.Bytes, []int64{2}, []byte("\x02\x00\x00\x00ab\x01\x00\x00\x00c")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dt, shape, out, err := raw(t, unhex(t, tt.wire))
			if err != nil {
				t.Fatal(err)
			}
			if dt != tt.dt || len(shape) != len(tt.shape) || !bytes.Equal(out, tt.raw) {
				t.Errorf("got %v %v % x, want %v %v % x", dt, shape, out, tt.dt, tt.shape, tt.raw)
			}
			for i := range shape {
				if shape[i] != tt.shape[i] {
					t.Errorf("shape %v, want %v", shape, tt.shape)
				}
			}
		})
	}
}

func TestTensorProtoEncodeMatchesMakeTensorProto(t *testing.T) {
	// The writer produces make_tensor_proto's bytes for the same tensors
	// (TensorContent for the array, typed fields for the scalar and the
	// strings, as TF's AsProto* would).
	tests := []struct {
		t    tensor.Tensor
		enc  Encoding
		wire string
	}{
		{tensor.Tensor{DataType: tensor.FP32, Shape: []int64{1, 2}, Data: f32s(1, 2)}, TensorContent, "08 01 12 08 12 02 08 01 12 02 08 02 22 08 00 00 80 3f 00 00 00 40"},
		{tensor.Tensor{DataType: tensor.FP32, Data: f32s(3)}, TypedFields, "08 01 12 00 2a 04 00 00 40 40"},
		{tensor.Tensor{DataType: tensor.Bytes, Shape: []int64{2}, Strings: [][]byte{[]byte("ab"), []byte("c")}}, TypedFields, "08 07 12 04 12 02 08 02 42 02 61 62 42 01 63"},
	}
	for _, tt := range tests {
		got := AppendTensorProto(nil, &tt.t, tt.enc)
		if want := unhex(t, tt.wire); !bytes.Equal(got, want) {
			t.Errorf("%v: got % x, want % x", tt.t.DataType, got, want)
		}
		if n := SizeTensorProto(&tt.t, tt.enc); n != len(got) {
			t.Errorf("%v: SizeTensorProto %d, wrote %d", tt.t.DataType, n, len(got))
		}
	}
}

func TestTensorProtoEveryDType(t *testing.T) {
	// docs/grpc.md §6.2: each dtype's typed field, read into v2 raw bytes with
	// TF's narrowing (low bits kept).
	le16 := func(vs ...uint16) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint16(b, v)
		}
		return b
	}
	le32 := func(vs ...uint32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		return b
	}
	le64 := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		return b
	}
	tests := []struct {
		name  string
		dtype int32
		set   func(protoreflect.Message)
		dt    tensor.DataType
		raw   []byte
	}{
		{"DT_FLOAT", 1, appendVals("float_val", protoreflect.ValueOfFloat32(1.5), protoreflect.ValueOfFloat32(-2)), tensor.FP32, f32s(1.5, -2)},
		{"DT_DOUBLE", 2, appendVals("double_val", protoreflect.ValueOfFloat64(1.25), protoreflect.ValueOfFloat64(1e300)), tensor.FP64, f64s(1.25, 1e300)},
		{"DT_INT32", 3, appendVals("int_val", i32v(-1, 7)...), tensor.Int32, le32(0xffffffff, 7)},
		{"DT_UINT8 wraps", 4, appendVals("int_val", i32v(300, 255)...), tensor.Uint8, []byte{44, 255}},
		{"DT_INT16", 5, appendVals("int_val", i32v(-2, 40000)...), tensor.Int16, le16(0xfffe, 40000)},
		{"DT_INT8", 6, appendVals("int_val", i32v(-1, 127)...), tensor.Int8, []byte{0xff, 127}},
		{"DT_UINT16", 17, appendVals("int_val", i32v(65535, 65537)...), tensor.Uint16, le16(65535, 1)},
		{"DT_INT64", 9, appendVals("int64_val", protoreflect.ValueOfInt64(-3), protoreflect.ValueOfInt64(math.MaxInt64)), tensor.Int64, le64(uint64(math.MaxUint64-2), math.MaxInt64)},
		{"DT_UINT32", 22, appendVals("uint32_val", protoreflect.ValueOfUint32(math.MaxUint32), protoreflect.ValueOfUint32(1)), tensor.Uint32, le32(math.MaxUint32, 1)},
		{"DT_UINT64", 23, appendVals("uint64_val", protoreflect.ValueOfUint64(math.MaxUint64), protoreflect.ValueOfUint64(2)), tensor.Uint64, le64(math.MaxUint64, 2)},
		{"DT_BOOL", 10, appendVals("bool_val", protoreflect.ValueOfBool(true), protoreflect.ValueOfBool(false)), tensor.Bool, []byte{1, 0}},
		{"DT_STRING", 7, appendVals("string_val", protoreflect.ValueOfBytes([]byte("x")), protoreflect.ValueOfBytes(nil)), tensor.Bytes, []byte("\x01\x00\x00\x00x\x00\x00\x00\x00")},
		{"DT_HALF", 19, appendVals("half_val", i32v(0x3c00, 0x1c000)...), tensor.FP16, le16(0x3c00, 0xc000)},
		{"DT_BFLOAT16", 14, appendVals("half_val", i32v(0x3f80, -16320)...), tensor.BF16, le16(0x3f80, 0xc040)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dt, _, out, err := raw(t, tpMsg(t, tt.dtype, []int64{2}, tt.set))
			if err != nil {
				t.Fatal(err)
			}
			if dt != tt.dt || !bytes.Equal(out, tt.raw) {
				t.Errorf("got %v % x, want %v % x", dt, out, tt.dt, tt.raw)
			}
			if d := DTypeOf(dt); int32(d) != tt.dtype {
				t.Errorf("DTypeOf(%v) = %d, want %d", dt, d, tt.dtype)
			}
		})
	}
}

func TestTensorProtoFromProtoRules(t *testing.T) {
	content := grpcproto.Content
	both := func(fs ...func(protoreflect.Message)) func(protoreflect.Message) {
		return func(m protoreflect.Message) {
			for _, f := range fs {
				f(m)
			}
		}
	}
	fv := func(vs ...float32) func(protoreflect.Message) {
		vals := make([]protoreflect.Value, len(vs))
		for i, v := range vs {
			vals[i] = protoreflect.ValueOfFloat32(v)
		}
		return appendVals("float_val", vals...)
	}
	tests := []struct {
		name  string
		dtype int32
		dims  []int64
		set   func(protoreflect.Message)
		raw   []byte
		err   error
	}{
		{"short typed field repeats the last value", 1, []int64{2, 2}, fv(1, 2), f32s(1, 2, 2, 2), nil},
		{"long typed field is truncated", 1, []int64{2}, fv(1, 2, 3), f32s(1, 2), nil},
		{"no values: zero fill", 1, []int64{3}, nil, f32s(0, 0, 0), nil},
		{"no values, strings: empty strings", 7, []int64{2}, nil, make([]byte, 8), nil},
		{"short strings repeat the last", 7, []int64{3}, appendVals("string_val", protoreflect.ValueOfBytes([]byte("a")), protoreflect.ValueOfBytes([]byte("bc"))), []byte("\x01\x00\x00\x00a\x02\x00\x00\x00bc\x02\x00\x00\x00bc"), nil},
		{"float64 array (numpy default) in tensor_content", 2, []int64{2}, content(f64s(0.1, -3)), f64s(0.1, -3), nil},
		{"non-empty tensor_content wins over float_val", 1, []int64{1}, both(fv(9), content(f32s(4))), f32s(4), nil},
		{"tensor_content of the wrong size", 1, []int64{2}, content(f32s(4)), nil, ErrParse},
		{"DT_BOOL content byte 2", 10, []int64{2}, content([]byte{1, 2}), nil, ErrParse},
		{"DT_BOOL content", 10, []int64{2}, content([]byte{1, 0}), []byte{1, 0}, nil},
		{"string list content", 7, []int64{2}, content([]byte("\x02\x01abc")), []byte("\x02\x00\x00\x00ab\x01\x00\x00\x00c"), nil},
		{"string list content too long", 7, []int64{2}, content([]byte("\x02\x01abcd")), nil, ErrParse},
		{"string list content truncated varint", 7, []int64{2}, content([]byte("\x02\x81")), nil, ErrParse},
		{"zero elements: values not read", 1, []int64{0, 3}, content([]byte{1}), []byte{}, nil},
		{"DT_INVALID", 0, []int64{1}, nil, nil, ErrParse},
		{"DT_FLOAT_REF", 101, []int64{1}, nil, nil, ErrParse},
		{"undefined dtype", 77, []int64{0}, nil, nil, ErrParse},
		{"DT_COMPLEX64 has no v2 type", 8, []int64{1}, nil, nil, ErrNoV2},
		{"DT_QINT8 has no v2 type", 11, []int64{1}, nil, nil, ErrNoV2},
		{"negative dim", 1, []int64{-1}, nil, nil, ErrParse},
		{"element count overflows", 1, []int64{1 << 32, 1 << 32}, nil, nil, ErrParse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, out, err := raw(t, tpMsg(t, tt.dtype, tt.dims, tt.set))
			if !errors.Is(err, tt.err) || (tt.err == nil && !bytes.Equal(out, tt.raw)) {
				t.Errorf("got % x, %v; want % x, %v", out, err, tt.raw, tt.err)
			}
		})
	}
}

func TestTensorProtoWire(t *testing.T) {
	// Unpacked repeated values (a legal encoding some writers use) read
	// like packed ones; a rank over 254 is invalid; malformed wire bytes
	// are ErrMalformed.
	dims := strings.Repeat("12 02 08 01 ", 255)
	tests := []struct {
		name string
		wire string
		raw  []byte
		err  error
	}{
		{"unpacked float_val", "08 01 12 04 12 02 08 02 2d 00 00 80 3f 2d 00 00 00 40", f32s(1, 2), nil},
		{"packed then unpacked", "08 01 12 04 12 02 08 03 2a 04 00 00 80 3f 2d 00 00 00 40", f32s(1, 2, 2), nil},
		{"unknown fields skipped", "08 01 12 00 18 05 9a 01 01 ff 2a 04 00 00 80 3f", f32s(1), nil},
		{"signalling NaN keeps its bits", "08 01 12 04 12 02 08 01 2a 04 30 30 80 ff", []byte{0x30, 0x30, 0x80, 0xff}, nil},
		{"rank 255", "08 01 12 fc 07 " + dims, nil, ErrParse},
		{"truncated", "08 01 12 04 12 02", nil, ErrMalformed},
		{"packed float not a multiple of 4", "08 01 12 00 2a 03 00 00 80", nil, ErrMalformed},
		{"bad varint in packed int_val", "08 03 12 00 3a 01 80", nil, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, out, err := raw(t, unhex(t, tt.wire))
			if !errors.Is(err, tt.err) || (tt.err == nil && !bytes.Equal(out, tt.raw)) {
				t.Errorf("got % x, %v; want % x, %v", out, err, tt.raw, tt.err)
			}
		})
	}
}
