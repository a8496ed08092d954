package grpcmap

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/internal/grpcproto"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfexample"
)

// example builds a tf.Example with one float feature per name.
func example(features map[string]float32) *dynamicpb.Message {
	e := grpcproto.New("tensorflow.Example")
	fs := e.Mutable(grpcproto.Field(e, "features")).Message()
	mp := fs.Mutable(grpcproto.Field(fs, "feature")).Map()
	for name, x := range features {
		f := mp.NewValue().Message()
		fl := f.Mutable(grpcproto.Field(f, "float_list")).Message()
		grpcproto.Append(fl, "value", valF32(x))
		mp.Set(protoreflect.ValueOfString(name).MapKey(), protoreflect.ValueOfMessage(f))
	}
	return e
}

// examplesRequest builds a ClassificationRequest (the same fields as a
// RegressionRequest) for spec, with a context when ctx is set.
func examplesRequest(spec *grpcproto.Spec, ctx *dynamicpb.Message, examples ...*dynamicpb.Message) []byte {
	m := grpcproto.New("tensorflow.serving.ClassificationRequest")
	if spec != nil {
		grpcproto.ModelSpec(m, *spec)
	}
	in := m.Mutable(grpcproto.Field(m, "input")).Message()
	var list protoreflect.Message
	if ctx != nil {
		list = in.Mutable(grpcproto.Field(in, "example_list_with_context")).Message()
		list.Set(grpcproto.Field(list, "context"), protoreflect.ValueOfMessage(ctx))
	} else {
		list = in.Mutable(grpcproto.Field(in, "example_list")).Message()
	}
	for _, e := range examples {
		grpcproto.Append(list, "examples", protoreflect.ValueOfMessage(e))
	}
	return grpcproto.Marshal(m)
}

func classifySig() *tensor.Signature {
	return &tensor.Signature{
		Inputs:  []tensor.Spec{{Name: "inputs", DataType: tensor.Bytes, Shape: []int64{-1}}},
		Outputs: []tensor.Spec{{Name: "classes", DataType: tensor.Bytes, Shape: []int64{-1, 2}}, {Name: "scores", DataType: tensor.FP32, Shape: []int64{-1, 2}}},
	}
}

func regressSig() *tensor.Signature {
	return &tensor.Signature{
		Inputs:  []tensor.Spec{{Name: "inputs", DataType: tensor.Bytes, Shape: []int64{-1, 1}}},
		Outputs: []tensor.Spec{{Name: "outputs", DataType: tensor.FP32, Shape: []int64{-1, 1}}},
	}
}

func TestClassify(t *testing.T) {
	e1, e2 := example(map[string]float32{"a": 1}), example(map[string]float32{"a": 2, "b": 3})
	msg := examplesRequest(&grpcproto.Spec{Name: "m", Version: v(4)}, nil, e1, e2)
	var asked route.Route
	out, ex, err := ExamplesRequest(nil, msg, tfexample.Classify, fixed(classifySig(), &asked), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if asked.Verb != route.Classify || ex.Examples != 2 {
		t.Errorf("asked %+v, exchange %+v", asked, ex)
	}
	m := decodeV2(t, out)
	in := grpcproto.Get(m, "inputs").List().Get(0).Message()
	raw := grpcproto.Get(m, "raw_input_contents").List().Get(0).Bytes()
	want := []byte{}
	for _, e := range []*dynamicpb.Message{e1, e2} {
		b := grpcproto.Marshal(e)
		want = append(want, byte(len(b)), 0, 0, 0)
		want = append(want, b...)
	}
	if grpcproto.Get(in, "name").String() != "inputs" || grpcproto.Get(in, "datatype").String() != "BYTES" ||
		grpcproto.Get(in, "shape").List().Get(0).Int() != 2 || !bytes.Equal(raw, want) || grpcproto.Get(m, "model_version").String() != "4" {
		t.Errorf("v2 request %v\nraw % x\nwant % x", m, raw, want)
	}

	ans := v2Answer("4",
		tensor.Tensor{Name: "classes", DataType: tensor.Bytes, Shape: []int64{2, 2}, Strings: [][]byte{[]byte("cat"), []byte("dog"), []byte("cat"), {}}},
		tensor.Tensor{Name: "scores", DataType: tensor.FP32, Shape: []int64{2, 2}, Data: f32s(0.75, 0.25, 0, 1)})
	b, err := ExamplesResponse(nil, ans, ex, Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := grpcproto.Unmarshal("tensorflow.serving.ClassificationResponse", b)
	if err != nil {
		t.Fatal(err)
	}
	cls := grpcproto.Get(grpcproto.Get(resp, "result").Message(), "classifications").List()
	if cls.Len() != 2 {
		t.Fatalf("%d classifications", cls.Len())
	}
	type class struct {
		label string
		score float32
	}
	wantCls := [][]class{{{"cat", 0.75}, {"dog", 0.25}}, {{"cat", 0}, {"", 1}}}
	for i := range wantCls {
		l := grpcproto.Get(cls.Get(i).Message(), "classes").List()
		for j, w := range wantCls[i] {
			c := l.Get(j).Message()
			if grpcproto.Get(c, "label").String() != w.label || float32(grpcproto.Get(c, "score").Float()) != w.score {
				t.Errorf("class %d/%d = %v, want %v", i, j, c, w)
			}
		}
	}
	spec := grpcproto.Get(resp, "model_spec").Message()
	if grpcproto.Get(spec, "name").String() != "m" || grpcproto.Get(spec, "signature_name").String() != DefaultSignature ||
		grpcproto.Get(grpcproto.Get(spec, "version").Message(), "value").Int() != 4 {
		t.Errorf("model_spec %v", spec)
	}
}

func TestRegressWithContext(t *testing.T) {
	ctx := example(map[string]float32{"a": 9, "c": 5})
	e1 := example(map[string]float32{"a": 1})
	msg := examplesRequest(&grpcproto.Spec{Name: "m"}, ctx, e1, example(nil))
	out, ex, err := ExamplesRequest(nil, msg, tfexample.Regress, fixed(regressSig(), nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := decodeV2(t, out)
	in := grpcproto.Get(m, "inputs").List().Get(0).Message()
	if shape := grpcproto.Get(in, "shape").List(); shape.Len() != 2 || shape.Get(0).Int() != 2 || shape.Get(1).Int() != 1 {
		t.Errorf("shape %v, want [2,1]", shape)
	}
	// The model parses each element as one tf.Example: the context's
	// features, the example's winning.
	raw := grpcproto.Get(m, "raw_input_contents").List().Get(0).Bytes()
	n := int(raw[0])
	first, err := grpcproto.Unmarshal("tensorflow.Example", raw[4:4+n])
	if err != nil {
		t.Fatal(err)
	}
	feats := grpcproto.Get(grpcproto.Get(first, "features").Message(), "feature").Map()
	get := func(name string) float64 {
		f := feats.Get(protoreflect.ValueOfString(name).MapKey()).Message()
		return grpcproto.Get(grpcproto.Get(f, "float_list").Message(), "value").List().Get(0).Float()
	}
	if feats.Len() != 2 || get("a") != 1 || get("c") != 5 {
		t.Errorf("merged example %v", first)
	}

	b, err := ExamplesResponse(nil, v2Answer("", tensor.Tensor{Name: "outputs", DataType: tensor.FP32, Shape: []int64{2, 1}, Data: f32s(0.5, 0)}), ex, Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := grpcproto.Unmarshal("tensorflow.serving.RegressionResponse", b)
	if err != nil {
		t.Fatal(err)
	}
	rs := grpcproto.Get(grpcproto.Get(resp, "result").Message(), "regressions").List()
	if rs.Len() != 2 || grpcproto.Get(rs.Get(0).Message(), "value").Float() != 0.5 || grpcproto.Get(rs.Get(1).Message(), "value").Float() != 0 {
		t.Errorf("regressions %v", rs)
	}
}

func TestExamplesErrors(t *testing.T) {
	e := example(map[string]float32{"a": 1})
	tests := []struct {
		name   string
		msg    []byte
		m      tfexample.Method
		sig    *tensor.Signature
		code   apierr.Code
		errMsg string
	}{
		{"no model_spec", examplesRequest(nil, nil, e), tfexample.Classify, classifySig(), apierr.InvalidArgument, "Missing ModelSpec"},
		{"unknown signature", examplesRequest(&grpcproto.Spec{Name: "m", Signature: "s"}, nil, e), tfexample.Classify, classifySig(), apierr.InvalidArgument, "No signature was found with the name: s"},
		{"a predict model", examplesRequest(&grpcproto.Spec{Name: "m"}, nil, e), tfexample.Classify, testSig(), apierr.InvalidArgument,
			"Expected classification signature method_name to be tensorflow/serving/classify. Was: tensorflow/serving/predict"},
		{"regress on a classifier", examplesRequest(&grpcproto.Spec{Name: "m"}, nil, e), tfexample.Regress, classifySig(), apierr.InvalidArgument,
			"Expected regression signature method_name to be tensorflow/serving/regress. Was: tensorflow/serving/classify"},
		{"no examples", examplesRequest(&grpcproto.Spec{Name: "m"}, nil), tfexample.Classify, classifySig(), apierr.InvalidArgument, "Input is empty."},
		{"bad example bytes", []byte{0x0a, 0x03, 0x0a, 0x01, 'm', 0x12, 0x06, 0x0a, 0x04, 0x0a, 0x02, 0x0a, 0x07}, tfexample.Classify, classifySig(), apierr.Internal, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ExamplesRequest(nil, tt.msg, tt.m, fixed(tt.sig, nil), Options{})
			wantErr(t, err, tt.code, tt.errMsg)
		})
	}
	// Answers TF would refuse after the run: the REST checks and texts.
	ex := &Exchange{Method: Classify, Route: route.Route{Model: "m"}, Target: Target{Signature: classifySig()}, Examples: 2}
	_, err := ExamplesResponse(nil, v2Answer("", tensor.Tensor{Name: "classes", DataType: tensor.Bytes, Shape: []int64{0, 2}, Strings: [][]byte{}}), ex, Options{})
	wantErr(t, err, apierr.InvalidArgument, "Expected 2 output tensor(s).  Got: 1")
	_, err = ExamplesResponse(nil, v2Answer("", tensor.Tensor{Name: "classes", DataType: tensor.Bytes, Shape: []int64{1, 1}, Strings: [][]byte{nil}},
		tensor.Tensor{Name: "scores", DataType: tensor.FP32, Shape: []int64{1, 1}, Data: f32s(1)}), ex, Options{})
	wantErr(t, err, apierr.InvalidArgument, "Expected classes output batch size of 2. Got: 1")
}
