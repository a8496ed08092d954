package grpcmap

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/internal/grpcproto"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// wireTensor is a TensorProto from docs/grpc.md §7's hex bytes.
func wireTensor(t *testing.T, h string) *dynamicpb.Message {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(h, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	m, err := grpcproto.Unmarshal("tensorflow.TensorProto", b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPredictRequestFromMakeTensorProto(t *testing.T) {
	var asked route.Route
	tests := []struct {
		name    string
		spec    grpcproto.Spec
		tensor  *dynamicpb.Message
		sig     *tensor.Signature
		version string
		dt      string
		shape   []int64
		raw     []byte
	}{
		{"float32 array in tensor_content", grpcproto.Spec{Name: "m"}, wireTensor(t, "08 01 12 08 12 02 08 01 12 02 08 02 22 08 00 00 80 3f 00 00 00 40"),
			testSig(), "", "FP32", []int64{1, 2}, f32s(1, 2)},
		{"scalar goes as [1]", grpcproto.Spec{Name: "m", Version: v(3)}, wireTensor(t, "08 01 12 00 2a 04 00 00 40 40"),
			testSig(), "3", "FP32", []int64{1}, f32s(3)},
		{"strings", grpcproto.Spec{Name: "m", Version: v(0)}, wireTensor(t, "08 07 12 04 12 02 08 02 42 02 61 62 42 01 63"),
			&tensor.Signature{Inputs: []tensor.Spec{{Name: "x", DataType: tensor.Bytes, Shape: []int64{-1}}}},
			"0", "BYTES", []int64{2}, []byte("\x02\x00\x00\x00ab\x01\x00\x00\x00c")},
		{"float64 array, unchecked (no metadata)", grpcproto.Spec{Name: "m"},
			grpcproto.TensorProto(2, []int64{3}, grpcproto.Content(f64s(1, 2, 3))), nil, "", "FP64", []int64{3}, f64s(1, 2, 3)},
		{"short float_val broadcast", grpcproto.Spec{Name: "m", Signature: "serving_default"},
			grpcproto.TensorProto(1, []int64{2, 2}, grpcproto.Values("float_val", valF32(7))), testSig(), "", "FP32", []int64{2, 2}, f32s(7, 7, 7, 7)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := grpcproto.PredictRequest(&tt.spec, map[string]*dynamicpb.Message{"x": tt.tensor})
			out, ex, err := PredictRequest(nil, msg, fixed(tt.sig, &asked), Options{ID: "r1"})
			if err != nil {
				t.Fatal(err)
			}
			if asked.Verb != route.Predict || asked.Model != "m" || asked.HasVersion != (tt.spec.Version != nil) {
				t.Errorf("resolver asked for %+v", asked)
			}
			if ex.SignatureName != DefaultSignature || ex.V2Path != V2ModelInfer {
				t.Errorf("exchange %+v", ex)
			}
			m := decodeV2(t, out)
			if grpcproto.Get(m, "model_name").String() != "m" || grpcproto.Get(m, "model_version").String() != tt.version || grpcproto.Get(m, "id").String() != "r1" {
				t.Errorf("head %v", m)
			}
			ins, raw := grpcproto.Get(m, "inputs").List(), grpcproto.Get(m, "raw_input_contents").List()
			if ins.Len() != 1 || raw.Len() != 1 {
				t.Fatalf("%d inputs, %d raw", ins.Len(), raw.Len())
			}
			in := ins.Get(0).Message()
			shape := grpcproto.Get(in, "shape").List()
			if grpcproto.Get(in, "name").String() != "x" || grpcproto.Get(in, "datatype").String() != tt.dt || shape.Len() != len(tt.shape) {
				t.Errorf("input %v", in)
			}
			for i := range tt.shape {
				if shape.Get(i).Int() != tt.shape[i] {
					t.Errorf("shape %v, want %v", shape, tt.shape)
				}
			}
			if !bytes.Equal(raw.Get(0).Bytes(), tt.raw) {
				t.Errorf("raw % x, want % x", raw.Get(0).Bytes(), tt.raw)
			}
			if grpcproto.Get(m, "outputs").List().Len() != 0 {
				t.Error("outputs requested without an output_filter")
			}
		})
	}
}

func TestPredictRequestRenamesAndFilter(t *testing.T) {
	sig := testSig()
	wire := testSig()
	wire.Inputs[0].Name, wire.Outputs[1].Name = "INPUT__0", "OUTPUT__1"
	sig.Wire = wire
	resolve := func(r route.Route, name string) (Target, error) {
		return Target{Signature: sig, Model: "m_onnx", Version: "7"}, nil
	}
	msg := grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{
		"x": grpcproto.TensorProto(1, []int64{1, 2}, grpcproto.Content(f32s(1, 2)))}, "z")
	out, ex, err := PredictRequest(nil, msg, resolve, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := decodeV2(t, out)
	in := grpcproto.Get(m, "inputs").List().Get(0).Message()
	outs := grpcproto.Get(m, "outputs").List()
	if grpcproto.Get(m, "model_name").String() != "m_onnx" || grpcproto.Get(m, "model_version").String() != "7" ||
		grpcproto.Get(in, "name").String() != "INPUT__0" || outs.Len() != 1 || grpcproto.Get(outs.Get(0).Message(), "name").String() != "OUTPUT__1" {
		t.Errorf("v2 request %v", m)
	}
	// The answer, in v2 names, comes back in TF names, only what the
	// filter asked for.
	ans := v2Answer("", tensor.Tensor{Name: "OUTPUT__1", DataType: tensor.Bytes, Shape: []int64{1}, Strings: [][]byte{[]byte("cat")}},
		tensor.Tensor{Name: "y", DataType: tensor.FP32, Shape: []int64{1, 2}, Data: f32s(1, 2)})
	tf, err := PredictResponse(nil, ans, ex, Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := grpcproto.Unmarshal("tensorflow.serving.PredictResponse", tf)
	if err != nil {
		t.Fatal(err)
	}
	outputs := grpcproto.Get(resp, "outputs").Map()
	z := outputs.Get(protoreflect.ValueOfString("z").MapKey())
	if outputs.Len() != 1 || !z.IsValid() || string(grpcproto.Get(z.Message(), "string_val").List().Get(0).Bytes()) != "cat" {
		t.Errorf("outputs %v", resp)
	}
}

// every dtype of docs/grpc.md §6.2 as a v2 answer, read back by a TF client.
func TestPredictResponseEveryDType(t *testing.T) {
	le := func(b ...byte) []byte { return b }
	tests := []struct {
		t     tensor.Tensor
		dtype int32
		field string
		want  any // the first value of the typed field
	}{
		{tensor.Tensor{DataType: tensor.FP32, Data: f32s(1.5)}, 1, "float_val", float32(1.5)},
		{tensor.Tensor{DataType: tensor.FP64, Data: f64s(-2.25)}, 2, "double_val", -2.25},
		{tensor.Tensor{DataType: tensor.Int32, Data: le(0xfe, 0xff, 0xff, 0xff)}, 3, "int_val", int32(-2)},
		{tensor.Tensor{DataType: tensor.Uint8, Data: le(255)}, 4, "int_val", int32(255)},
		{tensor.Tensor{DataType: tensor.Int16, Data: le(0xfe, 0xff)}, 5, "int_val", int32(-2)},
		{tensor.Tensor{DataType: tensor.Int8, Data: le(0xff)}, 6, "int_val", int32(-1)},
		{tensor.Tensor{DataType: tensor.Uint16, Data: le(0xff, 0xff)}, 17, "int_val", int32(65535)},
		{tensor.Tensor{DataType: tensor.Int64, Data: le(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)}, 9, "int64_val", int64(-1)},
		{tensor.Tensor{DataType: tensor.Uint32, Data: le(0xff, 0xff, 0xff, 0xff)}, 22, "uint32_val", uint32(0xffffffff)},
		{tensor.Tensor{DataType: tensor.Uint64, Data: le(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)}, 23, "uint64_val", uint64(1<<64 - 1)},
		{tensor.Tensor{DataType: tensor.Bool, Data: le(1)}, 10, "bool_val", true},
		{tensor.Tensor{DataType: tensor.FP16, Data: le(0x00, 0x3c)}, 19, "half_val", int32(0x3c00)},
		{tensor.Tensor{DataType: tensor.BF16, Data: le(0x80, 0xbf)}, 14, "half_val", int32(0xbf80)},
		{tensor.Tensor{DataType: tensor.Bytes, Strings: [][]byte{[]byte("s")}}, 7, "string_val", []byte("s")},
	}
	for _, tt := range tests {
		t.Run(tt.t.DataType.String(), func(t *testing.T) {
			out := tt.t
			out.Name, out.Shape = "o", []int64{1}
			ex := &Exchange{Method: Predict, Route: route.Route{Model: "m"}, SignatureName: DefaultSignature}
			for _, enc := range []tfgrpc.Encoding{tfgrpc.TypedFields, tfgrpc.TensorContent} {
				b, err := PredictResponse(nil, v2Answer("2", out), ex, Options{Encoding: enc})
				if err != nil {
					t.Fatal(err)
				}
				resp, err := grpcproto.Unmarshal("tensorflow.serving.PredictResponse", b)
				if err != nil {
					t.Fatal(err)
				}
				spec := grpcproto.Get(resp, "model_spec").Message()
				if grpcproto.Get(spec, "name").String() != "m" || grpcproto.Get(spec, "signature_name").String() != DefaultSignature ||
					grpcproto.Get(grpcproto.Get(spec, "version").Message(), "value").Int() != 2 {
					t.Errorf("model_spec %v", spec)
				}
				o := grpcproto.Get(resp, "outputs").Map().Get(protoreflect.ValueOfString("o").MapKey()).Message()
				if grpcproto.Get(o, "dtype").Int() != int64(tt.dtype) {
					t.Errorf("dtype %v, want %d", grpcproto.Get(o, "dtype"), tt.dtype)
				}
				content := grpcproto.Get(o, "tensor_content").Bytes()
				vals := grpcproto.Get(o, tt.field).List()
				if enc == tfgrpc.TensorContent {
					if vals.Len() != 0 || (tt.t.DataType != tensor.Bytes && !bytes.Equal(content, tt.t.Data)) {
						t.Errorf("content mode: %v values, content % x", vals.Len(), content)
					}
					continue
				}
				if len(content) != 0 || vals.Len() != 1 {
					t.Fatalf("typed mode: content % x, %d values", content, vals.Len())
				}
				got := vals.Get(0).Interface()
				if gb, ok := got.([]byte); ok {
					if !bytes.Equal(gb, tt.want.([]byte)) {
						t.Errorf("%s = %q", tt.field, gb)
					}
				} else if got != tt.want {
					t.Errorf("%s = %v (%T), want %v (%T)", tt.field, got, got, tt.want, tt.want)
				}
			}
		})
	}
}

func TestPredictResponseModelSpecVersion(t *testing.T) {
	out := tensor.Tensor{Name: "y", DataType: tensor.FP32, Shape: []int64{1, 2}, Data: f32s(1, 2)}
	z := tensor.Tensor{Name: "z", DataType: tensor.Bytes, Shape: []int64{1}, Strings: [][]byte{nil}}
	tests := []struct {
		name    string
		ex      Exchange
		v2      string
		opt     Options
		version int64
		has     bool
	}{
		{"request version", Exchange{Route: route.Route{Model: "m", Version: 5, HasVersion: true}}, "9", Options{}, 5, true},
		{"label resolved", Exchange{Route: route.Route{Model: "m", Label: "stable"}, Target: Target{Served: 4, HasServed: true}}, "9", Options{}, 4, true},
		{"Triton's executed version", Exchange{Route: route.Route{Model: "m"}}, "9", Options{}, 9, true},
		{"KServe: none", Exchange{Route: route.Route{Model: "m"}}, "", Options{}, 0, false},
		{"MLServer, configured default", Exchange{Route: route.Route{Model: "m"}}, "v1", Options{DefaultVersion: 1, HasDefaultVersion: true}, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.ex.Target.Signature = testSig()
			tt.ex.SignatureName = DefaultSignature
			b, err := PredictResponse(nil, v2Answer(tt.v2, out, z), &tt.ex, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			resp, _ := grpcproto.Unmarshal("tensorflow.serving.PredictResponse", b)
			spec := grpcproto.Get(resp, "model_spec").Message()
			has := spec.Has(grpcproto.Field(spec, "version"))
			if has != tt.has || (has && grpcproto.Get(grpcproto.Get(spec, "version").Message(), "value").Int() != tt.version) {
				t.Errorf("version %v (set %v), want %d (set %v)", grpcproto.Get(spec, "version"), has, tt.version, tt.has)
			}
		})
	}
}

// docs/grpc.md §3.3 and §6.5: TF Serving's checks before the call, in its order,
// with its codes and texts.
func TestPredictRequestErrors(t *testing.T) {
	x := grpcproto.TensorProto(1, []int64{1, 2}, grpcproto.Content(f32s(1, 2)))
	two := &tensor.Signature{Inputs: []tensor.Spec{{Name: "a", DataType: tensor.FP32}, {Name: "b", DataType: tensor.Int32}},
		Outputs: []tensor.Spec{{Name: "o2", DataType: tensor.FP32}, {Name: "o1", DataType: tensor.FP32}}}
	a := grpcproto.TensorProto(1, nil, grpcproto.Values("float_val", valF32(1)))
	b := grpcproto.TensorProto(3, nil, grpcproto.Values("int_val", valI32(1)))
	tests := []struct {
		name   string
		msg    []byte
		sig    *tensor.Signature
		opt    Options
		code   apierr.Code
		errMsg string
	}{
		{"malformed", []byte{0x0a, 0x05, 0x01}, testSig(), Options{}, apierr.Internal, ""},
		{"no model_spec", grpcproto.PredictRequest(nil, nil), testSig(), Options{}, apierr.InvalidArgument, "Missing ModelSpec"},
		{"empty name", grpcproto.PredictRequest(&grpcproto.Spec{}, nil), testSig(), Options{}, apierr.InvalidArgument, "ModelSpec has no name specified."},
		{"unknown model", grpcproto.PredictRequest(&grpcproto.Spec{Name: "n", Version: v(3)}, nil), testSig(), Options{}, apierr.NotFound, "Servable not found for request: Specific(n, 3)"},
		{"negative version", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m", Version: v(-1)}, nil), testSig(), Options{}, apierr.NotFound, "Servable not found for request: Specific(m, -1)"},
		{"unknown signature", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m", Signature: "sig2"}, nil), testSig(), Options{}, apierr.FailedPrecondition, `Serving signature key "sig2" not found.`},
		{"extra input", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{"x": x, "w": x}), testSig(), Options{},
			apierr.InvalidArgument, "input size does not match signature: 2!=1 len({w,x}) != len({x}). Sent extra: {w}. Missing but required: {}."},
		{"missing input", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{"a": a}), two, Options{},
			apierr.InvalidArgument, "input size does not match signature: 1!=2 len({a}) != len({a,b}). Sent extra: {}. Missing but required: {b}."},
		{"misnamed input", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{"a": a, "c": b}), two, Options{},
			apierr.InvalidArgument, "Signature input alias: b(feed name: b:0) not found in request and no default value provided. Inputs expected to be in the request {a,c}, or default input alias set: "},
		{"tensor_content of the wrong size", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{
			"x": grpcproto.TensorProto(1, []int64{3}, grpcproto.Content(f32s(1)))}), testSig(), Options{}, apierr.InvalidArgument, "tensor parsing error: x"},
		{"DT_INVALID", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{
			"x": grpcproto.TensorProto(0, []int64{1}, nil)}), testSig(), Options{}, apierr.InvalidArgument, "tensor parsing error: x"},
		{"DT_COMPLEX64", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{
			"x": grpcproto.TensorProto(8, []int64{1}, nil)}), testSig(), Options{}, apierr.Unimplemented, "input 'x' has TensorFlow dtype 8, which the v2 inference protocol has no datatype for"},
		{"unknown output", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{"a": a, "b": b}, "o3"), two, Options{},
			apierr.InvalidArgument, "output tensor alias not found in signature: o3 Outputs expected to be in the set {o1,o2}."},
		{"duplicate output", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{"a": a, "b": b}, "o1", "o1"), two, Options{},
			apierr.InvalidArgument, "duplicate output tensor alias: o1"},
		{"float64 for a float input (numpy's default)", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{
			"x": grpcproto.TensorProto(2, []int64{2}, grpcproto.Content(f64s(1, 2)))}), testSig(), Options{}, apierr.InvalidArgument, "Expects arg[0] to be float but double is provided"},
		{"second feed's dtype", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{"a": a, "b": a}), two, Options{},
			apierr.InvalidArgument, "Expects arg[1] to be int32 but float is provided"},
		{"BF16 to KServe", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{
			"x": grpcproto.TensorProto(14, []int64{1}, nil)}), nil, Options{Kind: oip.KServe}, apierr.InvalidArgument, "input 'x' has datatype BF16, which the KServe server does not support"},
		{"broadcast over the element limit", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{
			"x": grpcproto.TensorProto(1, []int64{1000, 1000}, nil)}), nil, Options{Limits: tensor.Limits{MaxElements: 1000}}, apierr.ResourceExhausted, "request has more than 1000 tensor elements"},
		{"broadcast over the byte limit", grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{
			"x": grpcproto.TensorProto(1, []int64{1000, 1000}, nil)}), nil, Options{MaxBytes: 1 << 20}, apierr.ResourceExhausted, "ModelInferRequest larger than the limit of 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := PredictRequest(nil, tt.msg, fixed(tt.sig, nil), tt.opt)
			wantErr(t, err, tt.code, tt.errMsg)
		})
	}
}

func TestPredictResponseMissingOutput(t *testing.T) {
	ex := &Exchange{Method: Predict, Route: route.Route{Model: "m"}, Target: Target{Signature: testSig()}}
	_, err := PredictResponse(nil, v2Answer("", tensor.Tensor{Name: "y", DataType: tensor.FP32, Shape: []int64{0}, Data: []byte{}}), ex, Options{})
	wantErr(t, err, apierr.Unknown, "Predict internal error")
	_, err = PredictResponse(nil, []byte{0x2a, 0x09}, ex, Options{})
	if code, _ := Status(err); code != 13 {
		t.Errorf("garbage answer: %v → code %d, want INTERNAL", err, code)
	}
}

// TF reads every input (Tensor::FromProto) before it looks at
// output_filter, and a shape whose byte size overflows is refused before
// anything is sized from it.
func TestPredictRequestCheckOrder(t *testing.T) {
	bad := grpcproto.TensorProto(1, []int64{3}, grpcproto.Content(f32s(1)))
	msg := grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{"x": bad}, "nope")
	_, _, err := PredictRequest(nil, msg, fixed(testSig(), nil), Options{})
	wantErr(t, err, apierr.InvalidArgument, "tensor parsing error: x")

	// 2^61+1 doubles: 8 bytes of content match the size modulo 2^64.
	huge := grpcproto.TensorProto(2, []int64{1<<61 + 1}, grpcproto.Content(f64s(1)))
	msg = grpcproto.PredictRequest(&grpcproto.Spec{Name: "m"}, map[string]*dynamicpb.Message{"x": huge})
	_, _, err = PredictRequest(nil, msg, fixed(nil, nil), Options{})
	wantErr(t, err, apierr.ResourceExhausted, "request has more than 67108864 tensor elements")
}
