package translate

import (
	"encoding/base64"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfexample"
)

var (
	examplesIn = tensor.Spec{Name: "inputs", DataType: tensor.Bytes, Shape: []int64{-1}}
	classifier = &tensor.Signature{Model: "c", Inputs: []tensor.Spec{examplesIn}, Outputs: []tensor.Spec{
		{Name: "classes", DataType: tensor.Bytes, Shape: []int64{-1, 2}}, {Name: "scores", DataType: tensor.FP32, Shape: []int64{-1, 2}}}}
	regressor = &tensor.Signature{Model: "r", Inputs: []tensor.Spec{examplesIn}, Outputs: []tensor.Spec{
		{Name: "outputs", DataType: tensor.FP32, Shape: []int64{-1}}}}
)

// TestTranslateExamplesRequest checks the v2 body for each server kind:
// one BYTES input "inputs" of shape [N] holding the examples, binary for
// Triton and KServe, base64 JSON for MLServer (serialized protos are not
// text).
func TestTranslateExamplesRequest(t *testing.T) {
	body := `{"examples": [{"x": 1.0}, {"x": 2.0}]}`
	want, err := tfexample.Parse([]byte(body), tfexample.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []oip.ServerKind{oip.Triton, oip.MLServer} {
		t.Run(kind.String(), func(t *testing.T) {
			req, ex, err := classify.Request([]byte(body), fixedSig(classifier), RequestOptions{Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			if ex.Examples != 2 || ex.Signature != classifier {
				t.Errorf("exchange %+v", ex)
			}
			h, rest := decodeHeader(t, req)
			if len(h.Inputs) != 1 || h.Inputs[0].Name != "inputs" || h.Inputs[0].Datatype != "BYTES" || len(h.Inputs[0].Shape) != 1 || h.Inputs[0].Shape[0] != 2 {
				t.Fatalf("inputs %+v", h.Inputs)
			}
			if kind == oip.Triton {
				if got, w := string(rest), string(respBytes(string(want.Examples[0]), string(want.Examples[1]))); got != w {
					t.Errorf("block %x, want %x", got, w)
				}
				return
			}
			for i, d := range h.Inputs[0].Data {
				if got, _ := base64.StdEncoding.DecodeString(d.(string)); string(got) != string(want.Examples[i]) {
					t.Errorf("example %d: %x, want %x", i, got, want.Examples[i])
				}
			}
		})
	}
}

func TestTranslateExamplesRequestErrors(t *testing.T) {
	notFound := apierr.Errorf(apierr.NotFound, "Servable not found for request: Latest(m)")
	resolveErr := func(string) (*tensor.Signature, error) { return nil, notFound }
	cases := []struct {
		name    string
		body    string
		m       Pipeline
		resolve func(string) (*tensor.Signature, error)
		status  int
		msg     string
	}{
		{"parse errors come before the model", `{"examples": []}`, classify, resolveErr, 400, "JSON Value: {\n    \"examples\": []\n} 'examples' value is an empty array"},
		{"unknown model", `{"examples": [{}]}`, classify, resolveErr, 404, notFound.Msg},
		{"regress on a classifier", `{"examples": [{}]}`, regress, fixedSig(classifier), 400,
			"Expected regression signature method_name to be tensorflow/serving/regress. Was: tensorflow/serving/classify"},
		{"non-UTF-8 examples on KServe", `{"examples": [{"x": 1.0}]}`, regress, fixedSig(regressor), 400,
			"input 'inputs' holds a string that is not valid UTF-8; the KServe server decodes BYTES tensors as UTF-8 text and cannot accept it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := c.m.Request([]byte(c.body), c.resolve, RequestOptions{Kind: oip.KServe})
			e := apierr.As(err)
			if err == nil || e.HTTPStatus() != c.status || e.Msg != c.msg {
				t.Fatalf("error %v, want %d %q", err, c.status, c.msg)
			}
		})
	}
}

func TestTranslateExamplesResponse(t *testing.T) {
	scoresOnly := &tensor.Signature{Inputs: []tensor.Spec{examplesIn}, Outputs: []tensor.Spec{{Name: "scores", DataType: tensor.FP32}}}
	cases := []struct {
		name    string
		m       Pipeline
		sig     *tensor.Signature
		outputs []respOut
		want    string
		status  int
	}{
		{"classify", classify, classifier, []respOut{
			{"classes", "BYTES", []int64{1, 2}, respBytes("no", "yes")},
			{"scores", "FP32", []int64{1, 2}, respFP32(0.25, 0.75)},
			{"extra", "INT64", []int64{1}, make([]byte, 8)},
		}, "{\n    \"results\": [[[\"no\", 0.25], [\"yes\", 0.75]]\n    ]\n}", 200},
		{"classify, scores only", classify, scoresOnly, []respOut{
			{"scores", "FP32", []int64{1, 2}, respFP32(0.25, 0.75)},
		}, "{\n    \"results\": [[[\"\", 0.25], [\"\", 0.75]]\n    ]\n}", 200},
		{"classify, a declared output missing", classify, classifier, []respOut{
			{"scores", "FP32", []int64{1, 2}, respFP32(0.25, 0.75)},
		}, "Expected 2 output tensor(s).  Got: 1", 400},
		{"classify, wrong batch", classify, scoresOnly, []respOut{
			{"scores", "FP32", []int64{2, 1}, respFP32(0.25, 0.75)},
		}, "Expected scores output batch size of 1. Got: 2", 400},
		{"regress [N,1]", regress, regressor, []respOut{
			{"outputs", "FP32", []int64{1, 1}, respFP32(4.5)},
		}, "{\n    \"results\": [4.5]\n}", 200},
		{"regress, outputs missing", regress, regressor, []respOut{
			{"y", "FP32", []int64{1}, respFP32(4.5)},
		}, "Expected output_tensors and output_tensor_names to have the same size.", 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, hl := respBody(c.outputs)
			got, err := c.m.Response(body, hl, Exchange{Signature: c.sig, Examples: 1}, tensor.Limits{})
			if c.status != 200 {
				e := apierr.As(err)
				if err == nil || e.HTTPStatus() != c.status || e.Msg != c.want {
					t.Fatalf("error %v, want %d %q", err, c.status, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

// fixedSig is a resolver that always finds sig.
func fixedSig(sig *tensor.Signature) func(string) (*tensor.Signature, error) {
	return func(string) (*tensor.Signature, error) { return sig, nil }
}

// TestTranslateExamplesRequestRenamed: a model map that renames the
// examples input ("inputs" in TF, another name on the v2 model) sends the
// serialized examples under the v2 name.
func TestTranslateExamplesRequestRenamed(t *testing.T) {
	wire := *classifier
	wire.Inputs = []tensor.Spec{{Name: "serialized_examples", DataType: tensor.Bytes, Shape: []int64{-1}}}
	sig := *classifier
	sig.Wire = &wire
	for _, c := range []struct {
		sig  *tensor.Signature
		want string
	}{
		{&sig, "serialized_examples"},
		{classifier, "inputs"},
	} {
		req, _, err := classify.Request([]byte(`{"examples": [{"x": 1.0}]}`), fixedSig(c.sig), RequestOptions{Kind: oip.Triton})
		if err != nil {
			t.Fatal(err)
		}
		if h, _ := decodeHeader(t, req); len(h.Inputs) != 1 || h.Inputs[0].Name != c.want {
			t.Errorf("inputs %+v, want one named %q", h.Inputs, c.want)
		}
	}
}
