package modelmap

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

const fullMap = `
servers:
  onnx: {url: "http://triton-onnx:8000", kind: triton, bearer_token_file: /var/run/secrets/onnx/token, grpc: "triton-onnx:8001"}
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
	want := &Server{Name: "onnx", URL: "http://triton-onnx:8000", Kind: "triton", BearerTokenFile: "/var/run/secrets/onnx/token", GRPC: "triton-onnx:8001"}
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

// dedented is issue #19's case: "labels:" on line 8 is one space left of
// its model's other keys; the parser itself blames line 1 or 5.
const dedented = `servers:
  onnx: {url: "http://triton-onnx:8000"}
models:
  mnist:
    server: onnx
    model: mnist_onnx
    inputs: {images: input_1}
   labels: {stable: 3}
`

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		line      int
		want      string // the whole message after "line N: "
	}{
		{"syntax", "models:\n  m:\n    labels: {a: [}\n", 3, "invalid YAML: did not find expected node content"},
		{"tab indent", "models:\n\tm: {}\n", 2, "invalid YAML: found character that cannot start any token"},
		{"tab indent deeper", "models:\n  m:\n    model: a\n    inputs: {a: b}\n\tlabels: {}\n", 5, "invalid YAML: found character that cannot start any token"},
		{"dedented key", dedented, 8, "invalid YAML: did not find expected key"},
		{"dedented key, first model", "models:\n  m:\n    model: a\n   labels: {}\n  n: {}\n", 4, "invalid YAML: did not find expected key"},
		{"unclosed flow mapping", "models:\n  m: {model: a,\n    labels: {}\nservers: {}\n", 2, "invalid YAML: did not find expected ',' or '}'"},
		{"top-level unknown key", "servers: {}\nmodles: {}\n", 2, `top level: unknown key "modles" (want servers, models)`},
		{"root not mapping", "- a\n", 1, "top level: want a mapping, not a list"},
		{"model unknown key", "models:\n  m:\n    modle: x\n", 3, `models.m: unknown key "modle" (want server, split, split_key, labels, model, inputs, outputs, metadata, signatures, shadow)`},
		{"server unknown key", "servers:\n  s:\n    url: http://a:1\n    token: x\n", 4, `servers.s: unknown key "token" (want url, kind, bearer_token_file, grpc)`},
		{"server bad grpc", "servers:\n  s:\n    url: http://a:1\n    grpc: http://a:2\n", 4, `servers.s.grpc: "http://a:2": want host:port (the server's gRPC address)`},
		{"signature unknown key", "models:\n  m:\n    signatures:\n      s: {server: x}\n", 4, `models.m.signatures.s: unknown key "server" (want model, inputs, outputs, metadata)`},
		{"metadata unknown key", "models:\n  m:\n    metadata: {inputs: [{name: a, datatype: FP32, shape: [1]}], extra: 1}\n", 3, `models.m.metadata: unknown key "extra" (want inputs, outputs)`},
		{"spec unknown key", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, datatype: FP32, shape: [1], dims: [1]}\n", 5, `models.m.metadata.inputs[0]: unknown key "dims" (want name, datatype, shape)`},
		{"bad datatype", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, datatype: FLOAT32, shape: [1]}\n", 5, `models.m.metadata.inputs[0].datatype: unknown datatype "FLOAT32" (want a v2 datatype such as FP32, INT64, BYTES)`},
		{"TF datatype", "models:\n  m:\n    metadata:\n      inputs:\n        - name: a\n          datatype: DT_FLOAT\n          shape: [1]\n", 6, `models.m.metadata.inputs[0].datatype: unknown datatype "DT_FLOAT"`},
		{"no datatype", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, shape: [1]}\n", 5, `models.m.metadata.inputs[0]: tensor "a" has no datatype`},
		{"no shape", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, datatype: FP32}\n", 5, `models.m.metadata.inputs[0]: tensor "a" has no shape`},
		{"bad dim", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, datatype: FP32, shape: [-2]}\n", 5, `models.m.metadata.inputs[0].shape[0]: dimension -2 must be -1 (variable) or a size`},
		{"string dim", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, datatype: FP32, shape: [x]}\n", 5, `models.m.metadata.inputs[0].shape[0]: want an integer, not "x"`},
		{"no inputs", "models:\n  m:\n    metadata: {outputs: []}\n", 3, `models.m.metadata: metadata must list at least one input`},
		{"duplicate tensor", "models:\n  m:\n    metadata:\n      inputs:\n        - {name: a, datatype: FP32, shape: [1]}\n        - {name: a, datatype: FP32, shape: [1]}\n", 6, `models.m.metadata.inputs[1]: duplicate tensor name "a"`},
		{"duplicate model", "models:\n  m: {}\n  m: {}\n", 3, `models: duplicate key "m" (first on line 2)`},
		{"duplicate server", "servers:\n  s: {url: http://a:1}\n  s: {url: http://b:1}\n", 3, `servers: duplicate key "s" (first on line 2)`},
		{"duplicate label", "models:\n  m:\n    labels:\n      stable: 1\n      stable: 2\n", 5, `models.m.labels: duplicate key "stable" (first on line 4)`},
		{"duplicate signature", "models:\n  m:\n    signatures:\n      a: {}\n      a: {}\n", 5, `models.m.signatures: duplicate key "a" (first on line 4)`},
		{"duplicate field", "models:\n  m:\n    model: a\n    model: b\n", 4, `models.m: duplicate key "model" (first on line 3)`},
		{"undefined server", "models:\n  m:\n    server: onnx\n", 3, `models.m.server: uses server "onnx", which servers does not define`},
		{"redefined default", "servers:\n  default: {url: http://a:1}\n", 2, `servers.default: server "default" is --backend's and cannot be redefined`},
		{"server without url", "servers:\n  s: {kind: triton}\n", 2, `servers.s: server "s" has no url`},
		{"bad url", "servers:\n  s: {url: \"ftp://a\"}\n", 2, `servers.s.url: "ftp://a": want http://host:port or https://host:port`},
		{"bad kind", "servers:\n  s: {url: \"http://a:1\", kind: torch}\n", 2, `servers.s.kind: kind "torch": want v2 (or auto), triton, kserve, mlserver or tfserving`},
		{"label nowhere", "models:\n  m:\n    labels:\n      stable:\n", 4, `models.m.labels.stable: label "stable" points nowhere: give it a version number`},
		{"label not a number", "models:\n  m:\n    labels: {stable: latest}\n", 3, `models.m.labels.stable: want an integer, not "latest"`},
		{"label a fraction", "models:\n  m:\n    labels:\n      stable: 1\n      canary: 1.5\n", 5, `models.m.labels.canary: want an integer, not "1.5"`},
		{"label negative", "models:\n  m:\n    labels: {stable: -1}\n", 3, `models.m.labels.stable: label "stable": version -1 is negative`},
		{"serving_default signature", "models:\n  m:\n    signatures:\n      serving_default: {}\n", 4, `models.m.signatures.serving_default: signature "serving_default" is the model's top-level entry; set its fields there`},
		{"rename collision", "models:\n  m:\n    inputs: {a: x, b: x}\n", 3, `models.m.inputs.b: "a" and "b" both rename to "x"`},
		{"rename not in metadata", "models:\n  m:\n    inputs: {a: x}\n    metadata: {inputs: [{name: y, datatype: FP32, shape: [1]}]}\n", 3, `models.m.inputs.a: renames "a" to "x", which the metadata's inputs do not declare`},
		{"inherited rename not in metadata", "models:\n  m:\n    inputs: {a: x}\n    signatures:\n      s:\n        metadata: {inputs: [{name: y, datatype: FP32, shape: [1]}]}\n", 5, `models.m.signatures.s.inputs.a: renames "a" to "x"`},
		{"empty model name", "models:\n  m: {model: \"\"}\n", 2, `models.m.model: the v2 model name must not be empty`},
		{"model is a list", "models:\n  m: [a]\n", 2, `models.m: want a mapping, not a list`},
		{"rename to mapping", "models:\n  m:\n    outputs: {a: {b: c}}\n", 3, `models.m.outputs.a: want a string, not a mapping`},
		{"two documents", "models:\n  m: {}\n---\nmodels:\n  n: {}\n", 3, "a second YAML document: a model map is one document"},
		{"the first problem in the file", "models:\n  b: {server: nope}\n  a: {labels: {x: -1}}\n", 2, `models.b.server: uses server "nope"`},
		{"alias bomb", aliasBomb(500), 0, "the map is too large: its mappings, aliases expanded, would take the YAML decoder more than 25000000 key comparisons"},
		{"huge mapping", hugeMapping(8000), 2, "models: 8000 keys in one mapping: a model map may hold about 7,000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			want := tc.want
			if tc.line > 0 {
				want = fmt.Sprintf("line %d: %s", tc.line, tc.want)
			}
			if e.Line != tc.line || !strings.HasPrefix(e.Error(), want) {
				t.Errorf("err = %q (line %d)\nwant %q", e.Error(), e.Line, want)
			}
		})
	}
}

// aliasBomb is a map whose n models all alias one set of n labels: a
// file of a few KiB that would expand to n² entries.
func aliasBomb(n int) string {
	var b strings.Builder
	b.WriteString("models:\n  m0:\n    labels: &l\n")
	for i := range n {
		fmt.Fprintf(&b, "      l%d: %d\n", i, i)
	}
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  m%d: {labels: *l}\n", i)
	}
	return b.String()
}

// hugeMapping is a map of n models.
func hugeMapping(n int) string {
	var b strings.Builder
	b.WriteString("servers: {}\nmodels:\n")
	for i := range n {
		fmt.Fprintf(&b, "  m%d: {}\n", i)
	}
	return b.String()
}

// TestParseAliases: anchors and aliases are YAML the decoder handles (and
// bounds, see "alias bomb"), so a map may share an entry.
func TestParseAliases(t *testing.T) {
	m, err := Parse([]byte("servers:\n  a: &srv {url: \"http://a:1\", kind: triton}\n  b: *srv\nmodels:\n  m: {server: b}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b := m.Server("b"); b == nil || b.URL != "http://a:1" || b.Kind != "triton" || m.ServerOf("m") != "b" {
		t.Errorf("aliased server = %+v", b)
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
