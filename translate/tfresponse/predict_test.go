package tfresponse

import (
	"errors"
	"math"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// fixed builds a fixed-size tensor from little-endian element bits.
func fixed(name string, dt tensor.DataType, shape []int64, elems ...uint64) tensor.Tensor {
	size := dt.Size()
	data := make([]byte, len(elems)*size)
	for i, e := range elems {
		for j := range size {
			data[i*size+j] = byte(e >> (8 * j))
		}
	}
	return tensor.Tensor{Name: name, DataType: dt, Shape: shape, Data: data}
}

func f32(name string, shape []int64, vs ...float32) tensor.Tensor {
	bits := make([]uint64, len(vs))
	for i, v := range vs {
		bits[i] = uint64(math.Float32bits(v))
	}
	return fixed(name, tensor.FP32, shape, bits...)
}

func strs(name string, shape []int64, vs ...string) tensor.Tensor {
	t := tensor.Tensor{Name: name, DataType: tensor.Bytes, Shape: shape}
	for _, v := range vs {
		t.Strings = append(t.Strings, []byte(v))
	}
	return t
}

func neg(v int64) uint64 { return uint64(v) }

func TestPredict(t *testing.T) {
	row, col := tfjson.Row, tfjson.Columnar
	cases := []struct {
		name    string
		format  tfjson.Format
		outputs []tensor.Tensor
		want    string
	}{
		{"row rank-1", row, []tensor.Tensor{f32("y", []int64{3}, 2.5, 3, 4.5)},
			"{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"},
		{"row rank-2", row, []tensor.Tensor{f32("y", []int64{2, 2}, 2.5, 3, 3.5, 4)},
			"{\n    \"predictions\": [[2.5, 3.0], [3.5, 4.0]\n    ]\n}"},
		{"row zero batch keeps nothing of the other dims", row, []tensor.Tensor{f32("y", []int64{0, 5})},
			"{\n    \"predictions\": []\n}"},
		{"row b64 without name (single output)", row, []tensor.Tensor{strs("x_bytes", []int64{2}, "hello", "world")},
			"{\n    \"predictions\": [{\n            \"b64\": \"aGVsbG8=\"\n        }, {\n            \"b64\": \"d29ybGQ=\"\n        }\n    ]\n}"},
		{"_bytes suffix is case-sensitive", row, []tensor.Tensor{strs("x_BYTES", []int64{1}, "hi")},
			"{\n    \"predictions\": [\"hi\"\n    ]\n}"},
		{"_bytes only applies to strings", row, []tensor.Tensor{fixed("x_bytes", tensor.Uint8, []int64{2}, 1, 2)},
			"{\n    \"predictions\": [1, 2\n    ]\n}"},
		{"rapidjson string escaping", col, []tensor.Tensor{strs("s", nil, "a\"b\\c\x01\x1f\t/<\x7f\xff\u2028")},
			"{\n    \"outputs\": \"a\\\"b\\\\c\\u0001\\u001F\\t/<\x7f\xff\u2028\"\n}"},
		{"columnar rank-1: one value per line", col, []tensor.Tensor{f32("y", []int64{2}, 3.5, 4)},
			"{\n    \"outputs\": [\n        3.5,\n        4.0\n    ]\n}"},
		{"columnar rank-0", col, []tensor.Tensor{f32("y", nil, 7)},
			"{\n    \"outputs\": 7.0\n}"},
		{"columnar empty", col, []tensor.Tensor{f32("y", []int64{0})},
			"{\n    \"outputs\": []\n}"},
		{"columnar multi, sorted, no batch check", col, []tensor.Tensor{
			fixed("b", tensor.Int32, nil, 7), f32("a", []int64{2}, 1, 2)},
			"{\n    \"outputs\": {\n        \"a\": [\n            1.0,\n            2.0\n        ],\n        \"b\": 7\n    }\n}"},
		{"columnar multi zero-size", col, []tensor.Tensor{f32("a", []int64{2, 0}), f32("b", []int64{1, 0, 3})},
			"{\n    \"outputs\": {\n        \"a\": [\n            [],\n            []\n        ],\n        \"b\": [\n            []\n        ]\n    }\n}"},
		{"row multi, sorted by name", row, []tensor.Tensor{
			fixed("b", tensor.Int32, []int64{2, 2}, 1, 2, 3, 4), f32("a", []int64{2}, 1, 2)},
			"{\n    \"predictions\": [\n        {\n            \"a\": 1.0,\n            \"b\": [1, 2]\n        },\n        {\n            \"a\": 2.0,\n            \"b\": [3, 4]\n        }\n    ]\n}"},
		{"integers full width, never quoted", row, []tensor.Tensor{
			fixed("i64", tensor.Int64, []int64{1, 2}, neg(math.MinInt64), math.MaxInt64),
			fixed("u64", tensor.Uint64, []int64{1, 1}, math.MaxUint64),
			fixed("i8", tensor.Int8, []int64{1, 2}, neg(-128), 127),
			fixed("u8", tensor.Uint8, []int64{1}, 255),
			fixed("i16", tensor.Int16, []int64{1}, neg(-32768)),
			fixed("u32", tensor.Uint32, []int64{1}, math.MaxUint32),
			fixed("i32", tensor.Int32, []int64{1}, neg(math.MinInt32)),
			fixed("ok", tensor.Bool, []int64{1, 3}, 0, 1, 2)},
			"{\n    \"predictions\": [\n        {\n            \"i16\": -32768,\n            \"i32\": -2147483648,\n" +
				"            \"i64\": [-9223372036854775808, 9223372036854775807],\n            \"i8\": [-128, 127],\n" +
				"            \"ok\": [false, true, true],\n            \"u32\": 4294967295,\n" +
				"            \"u64\": [18446744073709551615],\n            \"u8\": 255\n        }\n    ]\n}"},
		{"DESIGN departure: FP16, BF16 as floats, UINT16 as integers", row, []tensor.Tensor{
			fixed("h", tensor.FP16, []int64{1, 3}, 0x3e00, 0x2e66, 0xfc00),
			fixed("bf", tensor.BF16, []int64{1, 2}, 0x3f80, 0xc049),
			fixed("u16", tensor.Uint16, []int64{1}, 65535)},
			"{\n    \"predictions\": [\n        {\n            \"bf\": [1.0, -3.140625],\n" +
				"            \"h\": [1.5, 0.0999755859, -Infinity],\n            \"u16\": 65535\n        }\n    ]\n}"},
		{"doubles and non-finite floats", col, []tensor.Tensor{
			fixed("d", tensor.FP64, []int64{3}, math.Float64bits(1.0/3), math.Float64bits(math.NaN()), math.Float64bits(1e21))},
			"{\n    \"outputs\": [\n        0.33333333333333331,\n        NaN,\n        1e+21\n    ]\n}"},
		{"unwritable datatype without elements is fine", col, []tensor.Tensor{{Name: "z", Shape: []int64{2, 0}}},
			"{\n    \"outputs\": [\n        [],\n        []\n    ]\n}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Predict([]byte("> "), c.outputs, c.format)
			if err != nil {
				t.Fatalf("Predict: %v", err)
			}
			if want := "> " + c.want; string(got) != want {
				t.Errorf("Predict:\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestPredictErrors(t *testing.T) {
	row, col := tfjson.Row, tfjson.Columnar
	invalid := tensor.Tensor{Name: "c", Shape: []int64{2}} // a datatype Predict cannot write
	cases := []struct {
		name    string
		format  tfjson.Format
		outputs []tensor.Tensor
		code    apierr.Code
		msg     string
	}{
		{"no outputs", row, nil, apierr.InvalidArgument, "Cannot convert empty tensor map to JSON"},
		{"bad format", 0, []tensor.Tensor{f32("y", []int64{1}, 1)}, apierr.InvalidArgument, "Invalid request format"},
		{"row scalar", row, []tensor.Tensor{f32("y", nil, 1)}, apierr.InvalidArgument, "Tensor name: y has no shape information "},
		{"row scalar among others, in name order", row, []tensor.Tensor{f32("b", []int64{1}, 1), f32("a", nil, 1)},
			apierr.InvalidArgument, "Tensor name: a has no shape information "},
		{"row batch mismatch", row, []tensor.Tensor{f32("b", []int64{1}, 1), f32("a", []int64{2}, 1, 2)},
			apierr.InvalidArgument, "Tensor name: b has inconsistent batch size: 1 expecting: 2"},
		{"unwritable datatype, row", row, []tensor.Tensor{invalid}, apierr.InvalidArgument, "Failed to write JSON value for tensor type: invalid"},
		{"unwritable datatype, columnar", col, []tensor.Tensor{f32("a", []int64{1}, 1), invalid},
			apierr.InvalidArgument, "Failed to write JSON value for tensor type: invalid"},
		{"unwritable datatype after the shape checks", row, []tensor.Tensor{invalid, f32("a", []int64{1}, 1)},
			apierr.InvalidArgument, "Tensor name: c has inconsistent batch size: 2 expecting: 1"},
		{"data shorter than shape", col, []tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{2}, Data: make([]byte, 4)}},
			apierr.Internal, "Failed to write JSON value for tensor: y"},
		{"strings fewer than shape", col, []tensor.Tensor{strs("s", []int64{3}, "a")}, apierr.Internal, "Failed to write JSON value for tensor: s"},
		{"negative dimension", col, []tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{-1}}},
			apierr.Internal, "Failed to write JSON value for tensor: y"},
		{"empty tensor with a huge shape", col, []tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{1 << 40, 0}}},
			apierr.Internal, "Failed to write JSON value for tensor: y"},
		{"duplicate names", col, []tensor.Tensor{f32("y", nil, 1), f32("y", nil, 2)}, apierr.Internal, "Duplicate output tensor: y"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := []byte("keep")
			got, err := Predict(dst, c.outputs, c.format)
			var e *apierr.Error
			if !errors.As(err, &e) {
				t.Fatalf("Predict error = %v, want *apierr.Error", err)
			}
			if e.Code != c.code || e.Msg != c.msg {
				t.Errorf("error = %s %q, want %s %q", e.Code, e.Msg, c.code, c.msg)
			}
			if string(got) != "keep" {
				t.Errorf("dst = %q after an error, want it unchanged", got)
			}
		})
	}
}

// TestPredictDoesNotModifyOutputs checks that sorting works on indexes:
// the caller's slice order and tensors stay as they were.
func TestPredictDoesNotModifyOutputs(t *testing.T) {
	outs := []tensor.Tensor{f32("b", []int64{1}, 1), f32("a", []int64{1}, 2)}
	if _, err := Predict(nil, outs, tfjson.Row); err != nil {
		t.Fatal(err)
	}
	if outs[0].Name != "b" || outs[1].Name != "a" || len(outs[0].Shape) != 1 {
		t.Errorf("outputs changed: %+v", outs)
	}
}

// TestPredictLargeRow checks a big output end to end against values
// formatted one by one, and that results do not share the pooled buffer.
func TestPredictLargeRow(t *testing.T) {
	vals := make([]float32, 3000)
	for i := range vals {
		vals[i] = float32(i)/7 - 100
	}
	first, err := Predict(nil, []tensor.Tensor{f32("y", []int64{1, 1000, 3}, vals...)}, tfjson.Row)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n    \"predictions\": [["
	for i := 0; i < 1000; i++ {
		if i > 0 {
			want += ", "
		}
		want += "["
		for j := 0; j < 3; j++ {
			if j > 0 {
				want += ", "
			}
			v := vals[3*i+j]
			want += string(jsontext.AppendFloat32(nil, v))
		}
		want += "]"
	}
	want += "]\n    ]\n}"
	snapshot := string(first)
	if snapshot != want {
		t.Fatalf("large row output differs (len %d vs %d)", len(snapshot), len(want))
	}
	if _, err := Predict(nil, []tensor.Tensor{f32("z", []int64{1}, 9)}, tfjson.Row); err != nil {
		t.Fatal(err)
	}
	if string(first) != snapshot {
		t.Error("a later call changed an earlier result: the pooled buffer leaked out")
	}
}

func TestError(t *testing.T) {
	cases := []struct{ msg, want string }{
		{"Missing 'inputs' or 'instances' key", "{\n    \"error\": \"Missing 'inputs' or 'instances' key\"\n}"},
		{"JSON Value: {\n    \"a\": 1\n} Is not object", "{\n    \"error\": \"JSON Value: {\\n    \\\"a\\\": 1\\n} Is not object\"\n}"},
		{"", "{\n    \"error\": \"\"\n}"},
		{"nul \x00 and \xff", "{\n    \"error\": \"nul \\u0000 and \xff\"\n}"},
	}
	for _, c := range cases {
		if got := string(Error([]byte("x"), c.msg)); got != "x"+c.want {
			t.Errorf("Error(%q) = %q, want %q", c.msg, got, c.want)
		}
	}
}
