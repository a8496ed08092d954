package tensor

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestDataTypeTable(t *testing.T) {
	tests := []struct {
		d                     DataType
		v2, tf, short, triton string
		size                  int
	}{
		{Bool, "BOOL", "DT_BOOL", "bool", "TYPE_BOOL", 1},
		{Uint8, "UINT8", "DT_UINT8", "uint8", "TYPE_UINT8", 1},
		{Uint16, "UINT16", "DT_UINT16", "uint16", "TYPE_UINT16", 2},
		{Uint32, "UINT32", "DT_UINT32", "uint32", "TYPE_UINT32", 4},
		{Uint64, "UINT64", "DT_UINT64", "uint64", "TYPE_UINT64", 8},
		{Int8, "INT8", "DT_INT8", "int8", "TYPE_INT8", 1},
		{Int16, "INT16", "DT_INT16", "int16", "TYPE_INT16", 2},
		{Int32, "INT32", "DT_INT32", "int32", "TYPE_INT32", 4},
		{Int64, "INT64", "DT_INT64", "int64", "TYPE_INT64", 8},
		{FP16, "FP16", "DT_HALF", "half", "TYPE_FP16", 2},
		{FP32, "FP32", "DT_FLOAT", "float", "TYPE_FP32", 4},
		{FP64, "FP64", "DT_DOUBLE", "double", "TYPE_FP64", 8},
		{BF16, "BF16", "DT_BFLOAT16", "bfloat16", "TYPE_BF16", 2},
		{Bytes, "BYTES", "DT_STRING", "string", "TYPE_STRING", 0},
	}
	if len(tests) != int(numDataTypes)-1 {
		t.Fatalf("table test covers %d types, the table has %d", len(tests), numDataTypes-1)
	}
	for _, tt := range tests {
		if tt.d.String() != tt.v2 || tt.d.TFName() != tt.tf || tt.d.TFShortName() != tt.short || tt.d.Size() != tt.size {
			t.Errorf("%v: got %s %s %s %d", tt.v2, tt.d, tt.d.TFName(), tt.d.TFShortName(), tt.d.Size())
		}
		for name, parse := range map[string]func(string) (DataType, bool){tt.v2: ParseV2, tt.tf: ParseTF, tt.triton: ParseTriton} {
			if got, ok := parse(name); !ok || got != tt.d {
				t.Errorf("parse(%q) = %v, %v", name, got, ok)
			}
		}
	}
	for _, bad := range []string{"", "fp32", "STRING", "INVALID", "DT_INVALID"} {
		if d, ok := ParseV2(bad); ok {
			t.Errorf("ParseV2(%q) = %v, want no match (names are case-sensitive)", bad, d)
		}
	}
	if Invalid.Valid() || DataType(200).Valid() || DataType(200).String() != "INVALID" || DataType(200).Size() != 0 {
		t.Error("out-of-table datatypes must be invalid, named INVALID, size 0")
	}
}

func TestNumElements(t *testing.T) {
	tests := []struct {
		shape []int64
		want  int64
		err   bool
	}{
		{nil, 1, false},
		{[]int64{}, 1, false},
		{[]int64{1, 224, 224, 3}, 150528, false},
		{[]int64{0, 1 << 62}, 0, false},
		{[]int64{-1}, 0, true},
		{[]int64{1 << 32, 1 << 32}, 0, true},
	}
	for _, tt := range tests {
		got, err := NumElements(tt.shape)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("NumElements(%v) = %d, %v; want %d, err=%v", tt.shape, got, err, tt.want, tt.err)
		}
		if err != nil && !errors.Is(err, ErrShape) {
			t.Errorf("NumElements(%v) error %v does not wrap ErrShape", tt.shape, err)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		t    Tensor
		ok   bool
	}{
		{"fp32 ok", Tensor{DataType: FP32, Shape: []int64{2}, Data: make([]byte, 8)}, true},
		{"fp32 short", Tensor{DataType: FP32, Shape: []int64{2}, Data: make([]byte, 7)}, false},
		{"scalar", Tensor{DataType: Int64, Data: make([]byte, 8)}, true},
		{"bytes ok", Tensor{DataType: Bytes, Shape: []int64{1, 2}, Strings: [][]byte{nil, []byte("a")}}, true},
		{"bytes count", Tensor{DataType: Bytes, Shape: []int64{3}, Strings: [][]byte{nil}}, false},
		{"invalid type", Tensor{Shape: []int64{1}}, false},
		{"negative dim", Tensor{DataType: Bool, Shape: []int64{-1}}, false},
	}
	for _, tt := range tests {
		if err := tt.t.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestAccessors(t *testing.T) {
	le := func(b ...byte) []byte { return b }
	tests := []struct {
		t Tensor
		f float64
		i int64
	}{
		{Tensor{DataType: Int8, Data: le(0xFF)}, -1, -1},
		{Tensor{DataType: Uint16, Data: le(0x34, 0x12)}, 0x1234, 0x1234},
		{Tensor{DataType: Int32, Data: le(0xFE, 0xFF, 0xFF, 0xFF)}, -2, -2},
		{Tensor{DataType: FP16, Data: le(0x00, 0x3C)}, 1, 1},
		{Tensor{DataType: BF16, Data: le(0x20, 0xC0)}, -2.5, -2},
		{Tensor{DataType: FP32, Data: le(0x00, 0x00, 0xC0, 0x3F)}, 1.5, 1},
		{Tensor{DataType: Int64, Data: le(0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F)}, math.MaxInt64, math.MaxInt64},
		{Tensor{DataType: Bool, Data: le(1)}, 1, 1},
	}
	for _, tt := range tests {
		if f := tt.t.Float64At(0); f != tt.f {
			t.Errorf("%v Float64At = %v, want %v", tt.t.DataType, f, tt.f)
		}
		if i := tt.t.Int64At(0); i != tt.i {
			t.Errorf("%v Int64At = %v, want %v", tt.t.DataType, i, tt.i)
		}
	}
	u := Tensor{DataType: Uint64, Data: le(0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)}
	if u.Uint64At(0) != math.MaxUint64 {
		t.Errorf("Uint64At = %d", u.Uint64At(0))
	}
}

func TestBF16(t *testing.T) {
	// tritonclient's serialize_bf16_tensor: the upper half, truncated
	// (oip vector tritonclient-bf16-serialization: 1.005859375 → 0x3F80).
	for in, want := range map[float32]uint16{1.0: 0x3F80, -2.5: 0xC020, 1.005859375: 0x3F80} {
		if got := BF16FromFloat32(in); got != want {
			t.Errorf("BF16FromFloat32(%v) = %#04x, want %#04x", in, got, want)
		}
	}
	if BF16ToFloat32(0xC020) != -2.5 {
		t.Error("BF16ToFloat32(0xC020) != -2.5")
	}
}

func TestLimitsOrDefault(t *testing.T) {
	if got := (Limits{}).OrDefault(); got != DefaultLimits {
		t.Errorf("zero Limits → %+v, want defaults", got)
	}
	if got := (Limits{MaxDepth: 5}).OrDefault(); got.MaxDepth != 5 || got.MaxElements != DefaultLimits.MaxElements {
		t.Errorf("partial Limits → %+v", got)
	}
}

func TestSignatureLookup(t *testing.T) {
	s := Signature{Inputs: []Spec{{Name: "a"}, {Name: "b"}}, Outputs: []Spec{{Name: "y"}}}
	if in, ok := s.Input("b"); !ok || in.Name != "b" {
		t.Error("Input(b) not found")
	}
	if _, ok := s.Input("y"); ok {
		t.Error("Input(y) found an output")
	}
	if out, ok := s.Output("y"); !ok || out.Name != "y" {
		t.Error("Output(y) not found")
	}
}

func TestShapeString(t *testing.T) {
	for _, tt := range []struct {
		in   []int64
		want string
	}{{nil, "[]"}, {[]int64{3}, "[3]"}, {[]int64{1, 2, 3}, "[1,2,3]"}} {
		if got := ShapeString(tt.in); got != tt.want {
			t.Errorf("%v: %s", tt.in, got)
		}
	}
}

func TestNameSet(t *testing.T) {
	sent := []string{"b", "a", "b", "c"}
	a := NameSet(len(sent), func(i int) string { return sent[i] })
	b := NameSet(2, func(i int) string { return []string{"d", "b"}[i] })
	if got := strings.Join(a, ","); got != "a,b,c" {
		t.Errorf("NameSet = %s, want a,b,c", got)
	}
	if got := strings.Join(SetDifference(a, b), ","); got != "a,c" {
		t.Errorf("a-b = %s, want a,c", got)
	}
	if got := strings.Join(SetDifference(b, a), ","); got != "d" {
		t.Errorf("b-a = %s, want d", got)
	}
}

// TestSignatureEqual: every field counts, the v2 names' signature too.
func TestSignatureEqual(t *testing.T) {
	base := func() *Signature {
		return &Signature{Model: "m", Versions: []string{"1"}, Inputs: []Spec{{Name: "x", DataType: FP32, Shape: []int64{-1}}},
			Outputs: []Spec{{Name: "y", DataType: FP32, Shape: []int64{-1}}}, Batched: true}
	}
	for _, tc := range []struct {
		name string
		edit func(*Signature)
		want bool
	}{
		{"equal", func(*Signature) {}, true},
		{"model", func(s *Signature) { s.Model = "n" }, false},
		{"versions", func(s *Signature) { s.Versions = []string{"2"} }, false},
		{"input dtype", func(s *Signature) { s.Inputs[0].DataType = FP64 }, false},
		{"output shape", func(s *Signature) { s.Outputs[0].Shape = []int64{-1, 2} }, false},
		{"batched", func(s *Signature) { s.Batched = false }, false},
		{"wire names", func(s *Signature) { s.Wire = base() }, false},
	} {
		b := base()
		tc.edit(b)
		if got := base().Equal(b); got != tc.want {
			t.Errorf("%s: Equal = %v, want %v", tc.name, got, tc.want)
		}
	}
	var none *Signature
	if !none.Equal(nil) || none.Equal(base()) || base().Equal(nil) {
		t.Error("nil signatures: equal only to nil")
	}
}
