package modelmap

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

const fullMap = `
servers:
  onnx: {url: "http://triton-onnx:8000", kind: triton, bearer_token_file: /var/run/secrets/onnx/token}
models:
  mnist:
    server: onnx
    model: mnist_onnx
    labels: {stable: 3, canary: 4}
    inputs: {images: input_1}
    outputs: {scores: output_0}
    metadata:
      inputs:  [{name: input_1, datatype: FP32, shape: [-1, 784]}]
      outputs: [{name: output_0, datatype: FP32, shape: [-1, 10]}]
    signatures:
      predict_images: {model: mnist_onnx}
      classification: {model: mnist_estimator}
  plain:
`

func TestParseFull(t *testing.T) {
	m, err := Parse([]byte(fullMap))
	if err != nil {
		t.Fatal(err)
	}
	want := &Server{Name: "onnx", URL: "http://triton-onnx:8000", Kind: "triton", BearerTokenFile: "/var/run/secrets/onnx/token"}
	if got := m.Server("onnx"); !reflect.DeepEqual(got, want) {
		t.Errorf("server = %+v, want %+v", got, want)
	}
	mn := m.Model("mnist")
	if mn == nil || mn.Server != "onnx" || mn.Default.Model != "mnist_onnx" {
		t.Fatalf("mnist = %+v", mn)
	}
	if v, ok := mn.Version("canary"); !ok || v != 4 {
		t.Errorf("canary = %d %v", v, ok)
	}
	if _, ok := mn.Version("nope"); ok {
		t.Error("unknown label resolved")
	}
	md := &Metadata{
		Inputs:  []tensor.Spec{{Name: "input_1", DataType: tensor.FP32, Shape: []int64{-1, 784}}},
		Outputs: []tensor.Spec{{Name: "output_0", DataType: tensor.FP32, Shape: []int64{-1, 10}}},
	}
	if !reflect.DeepEqual(mn.Default.Metadata, md) {
		t.Errorf("metadata = %+v", mn.Default.Metadata)
	}
	pi, ok := mn.Signature("predict_images")
	if !ok || pi.Model != "mnist_onnx" || pi.Metadata != mn.Default.Metadata || pi.Inputs["images"] != "input_1" {
		t.Errorf("predict_images = %+v (same model inherits renames and metadata)", pi)
	}
	cl, _ := mn.Signature("classification")
	if cl.Model != "mnist_estimator" || cl.Metadata != nil {
		t.Errorf("classification = %+v (another model inherits no metadata)", cl)
	}
	for _, name := range []string{"", "serving_default"} {
		if s, ok := mn.Signature(name); !ok || s != mn.Default {
			t.Errorf("Signature(%q) is not the default", name)
		}
	}
	if _, ok := mn.Signature("other"); ok {
		t.Error("unknown signature resolved")
	}
	if got := mn.SignatureNames(); !reflect.DeepEqual(got, []string{"serving_default", "classification", "predict_images"}) {
		t.Errorf("names = %v", got)
	}
	if p := m.Model("plain"); p == nil || p.Default.Model != "plain" || p.Server != DefaultServer {
		t.Errorf("plain = %+v", p)
	}
	if m.ServerOf("mnist") != "onnx" || m.ServerOf("unmapped") != DefaultServer {
		t.Error("ServerOf")
	}
	var nilMap *Map
	if nilMap.Model("x") != nil || nilMap.ServerOf("x") != DefaultServer {
		t.Error("nil map")
	}
}

func TestParseEmpty(t *testing.T) {
	for _, doc := range []string{"", "# nothing\n", "models:\n", "servers: {}\nmodels: {}\n"} {
		m, err := Parse([]byte(doc))
		if err != nil || len(m.Models) != 0 {
			t.Errorf("%q: %v %v", doc, m, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		line      int
		want      string
	}{
		{"syntax", "models:\n  m:\n    labels: {a: [}\n", 3, "invalid YAML"},
		{"tab indent", "models:\n\tm: {}\n", 2, "invalid YAML"},
		{"top-level unknown key", "servers: {}\nmodles: {}\n", 2, `unknown key "modles" at the top level`},
		{"root not mapping", "- a\n", 1, "the map must be a mapping"},
		{"model unknown key", "models:\n  m:\n    modle: x\n", 3, `unknown key "modle" in model "m"`},
		{"server unknown key", "servers:\n  s:\n    url: http://a:1\n    token: x\n", 4, `unknown key "token" in server "s"`},
		{"signature unknown key", "models:\n  m:\n    signatures:\n      s: {server: x}\n", 4, `unknown key "server" in signature "s" of model "m"`},
		{"metadata unknown key", "models:\n  m:\n    metadata: {inputs: [{name: a, datatype: FP32, shape: [1]}], extra: 1}\n", 3, `unknown key "extra"`},
		{"spec unknown key", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, datatype: FP32, shape: [1], dims: [1]}\n", 5, `unknown key "dims"`},
		{"bad datatype", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, datatype: FLOAT32, shape: [1]}\n", 5, `unknown datatype "FLOAT32"`},
		{"TF datatype", "models:\n  m:\n    metadata:\n      inputs:\n        - name: a\n          datatype: DT_FLOAT\n          shape: [1]\n", 6, `unknown datatype "DT_FLOAT"`},
		{"no datatype", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, shape: [1]}\n", 5, `has no datatype`},
		{"no shape", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, datatype: FP32}\n", 5, `has no shape`},
		{"bad dim", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, datatype: FP32, shape: [-2]}\n", 5, `dimension -2`},
		{"string dim", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, datatype: FP32, shape: [x]}\n", 5, `must be an integer`},
		{"no inputs", "models:\n  m:\n    metadata: {outputs: []}\n", 3, `must list at least one input`},
		{"duplicate tensor", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, datatype: FP32, shape: [1]}\n        - {name: a, datatype: FP32, shape: [1]}\n", 6, `duplicate tensor name "a"`},
		{"duplicate model", "models:\n  m: {}\n  m: {}\n", 3, `duplicate key "m" in models`},
		{"duplicate server", "servers:\n  s: {url: http://a:1}\n  s: {url: http://b:1}\n", 3, `duplicate key "s" in servers`},
		{"duplicate label", "models:\n  m:\n    labels:\n      stable: 1\n      stable: 2\n", 5, `duplicate key "stable"`},
		{"duplicate signature", "models:\n  m:\n    signatures:\n      a: {}\n      a: {}\n", 5, `duplicate key "a"`},
		{"duplicate field", "models:\n  m:\n    model: a\n    model: b\n", 4, `duplicate key "model" in model "m"`},
		{"undefined server", "models:\n  m:\n    server: onnx\n", 3, `uses server "onnx", which servers does not define`},
		{"redefined default", "servers:\n  default: {url: http://a:1}\n", 2, `cannot be redefined`},
		{"server without url", "servers:\n  s: {kind: triton}\n", 2, `server "s" has no url`},
		{"bad url", "servers:\n  s: {url: \"ftp://a\"}\n", 2, `want http://host:port`},
		{"bad kind", "servers:\n  s: {url: \"http://a:1\", kind: torch}\n", 2, `kind "torch"`},
		{"label nowhere", "models:\n  m:\n    labels:\n      stable:\n", 4, `label "stable" points nowhere`},
		{"label not a number", "models:\n  m:\n    labels: {stable: latest}\n", 3, `label "stable" must be an integer`},
		{"label negative", "models:\n  m:\n    labels: {stable: -1}\n", 3, `is negative`},
		{"serving_default signature", "models:\n  m:\n    signatures:\n      serving_default: {}\n", 4, `top-level entry`},
		{"rename collision", "models:\n  m:\n    inputs: {a: x, b: x}\n", 3, `"a" and "b" both rename to "x"`},
		{"rename not in metadata", "models:\n  m:\n    inputs: {a: x}\n    metadata: {inputs: [{name: y, datatype: FP32, shape: [1]}]}\n", 3, `renames input "a" to "x", which its metadata does not declare`},
		{"empty model name", "models:\n  m: {model: \"\"}\n", 2, `must not be empty`},
		{"model is a list", "models:\n  m: [a]\n", 2, `model "m" must be a mapping`},
		{"alias", "x: &a {url: \"http://a:1\"}\nservers:\n  s: *a\n", 3, `YAML aliases (*a) are not supported`},
		{"rename to mapping", "models:\n  m:\n    outputs: {a: {b: c}}\n", 3, `must be a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if e.Line != tc.line || !strings.Contains(e.Msg, tc.want) {
				t.Errorf("err = %q (line %d), want line %d and %q", e.Error(), e.Line, tc.line, tc.want)
			}
		})
	}
}

func TestTFSignature(t *testing.T) {
	m, err := Parse([]byte(fullMap))
	if err != nil {
		t.Fatal(err)
	}
	wire := &tensor.Signature{Model: "mnist_onnx", Versions: []string{"3"}, MaxBatchSize: 8, Batched: true,
		Inputs:  []tensor.Spec{{Name: "input_1", DataType: tensor.FP32, Shape: []int64{-1, 784}}},
		Outputs: []tensor.Spec{{Name: "output_0", DataType: tensor.FP32, Shape: []int64{-1, 10}}, {Name: "extra", DataType: tensor.Int64}}}
	def := m.Model("mnist").Default
	def.Metadata = nil // use what the server publishes
	got := def.TFSignature(wire, "mnist")
	if got.Model != "mnist" || got.Inputs[0].Name != "images" || got.Outputs[0].Name != "scores" || got.Outputs[1].Name != "extra" {
		t.Errorf("tf view = %+v", got)
	}
	if got.Wire == nil || got.Wire.Inputs[0].Name != "input_1" || got.Wire.Outputs[0].Name != "output_0" {
		t.Errorf("wire view = %+v", got.Wire)
	}
	if wire.Inputs[0].Name != "input_1" || wire.Outputs[0].Name != "output_0" {
		t.Error("the cached signature was modified")
	}
	if !got.Batched || got.Versions[0] != "3" {
		t.Errorf("kept fields lost: %+v", got)
	}

	// Explicit metadata on a server that publishes no tensors (KServe).
	md := &Signature{Model: "sk", Outputs: map[string]string{"y": "predict"}, Metadata: &Metadata{
		Inputs:  []tensor.Spec{{Name: "x", DataType: tensor.FP64, Shape: []int64{-1, 4}}},
		Outputs: []tensor.Spec{{Name: "predict", DataType: tensor.Int64, Shape: []int64{-1}}}}}
	got = md.TFSignature(&tensor.Signature{Model: "sk", Versions: []string{"1"}}, "iris")
	if len(got.Inputs) != 1 || got.Inputs[0].Name != "x" || got.Outputs[0].Name != "y" || !got.Batched || got.Wire.Outputs[0].Name != "predict" {
		t.Errorf("explicit = %+v wire %+v", got, got.Wire)
	}
	// No renames: no wire view.
	plain := &Signature{Model: "p"}
	if got := plain.TFSignature(wire, "p"); got.Wire != nil || got.Inputs[0].Name != "input_1" {
		t.Errorf("plain = %+v", got)
	}
}
