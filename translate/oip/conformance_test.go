package oip

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/x448/float16"
)

// conformanceSkips are the oip_cases.json vectors this layer does not own,
// with the reason. They describe what a v2 server does with a request
// (its own input validation, output selection, raw binary requests): that
// is the mock server's behaviour to imitate, not the wire codec's. Their
// error bodies are still checked by TestConformanceErrorBodies.
var conformanceSkips = map[string]string{
	"triton-binary-data-output-overridden-by-listed-outputs": "server-side output selection (mock server); our requests list no outputs, asserted by refReadBinary",
	"triton-raw-binary-bytes-one-element":                    "Triton raw binary request handling (mock server); tfsbridge never sends IHCL 0",
	"triton-raw-binary-two-variable-dims":                    "Triton's own request validation (mock server)",
	"triton-ihcl-out-of-range":                               "Triton's own request header validation (mock server)",
	"triton-negative-dimension":                              "Triton's own request validation (mock server)",
	"triton-json-nesting-depth":                              "Triton's own request validation (mock server)",
	"triton-fp16-binary-input":                               "Triton's handling of a tritonclient request (mock server); our encoder is checked by the round-trip tests",
	"triton-data-and-binary-size-both":                       "Triton's own request validation (mock server)",
	"triton-binary-body-too-short":                           "Triton's own request validation (mock server)",
	"triton-json-data-too-long":                              "Triton's own request validation (mock server)",
	"kserve-binary-without-ihcl":                             "KServe's own request validation (mock server)",
	"mlserver-invalid-datatype-422":                          "MLServer's own request validation (mock server)",
	"mlserver-unknown-model-version":                         "MLServer's model lookup (mock server)",
	// Owned elsewhere in this package's tests:
	"tritonclient-bf16-serialization": "TestEncodeBF16Conformance",
	"triton-model-metadata-batch-dim": "TestParseModelMetadataConformance",
}

// want is the expected decoding of one output.
type want struct {
	Type  tensor.DataType
	Shape []int64
	F     []float64
	I     []int64
	S     []string
}

func f32s(vs ...float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = float64(float32(v))
	}
	return out
}

func f16s(vs ...float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = float64(float16.Fromfloat32(float32(v)).Float32())
	}
	return out
}

// kserveIn is the FP32 input of KServe's FP16OutputModel tests; its
// outputs are that input as FP16 and as FP32.
var kserveIn = []float64{6.8, 2.8, 4.8, 1.4, 6.0, 3.4, 4.5, 1.6}

// responseExpectations are the decodings the response vectors imply,
// transcribed from each case's "expected" (outputs_data, fp16/int32
// fields, the KServe tests' inputs) by hand, so a decoder bug cannot
// also bend the expectation.
var responseExpectations = map[string]map[string]want{
	"client-parse-mixed-binary-json-response": {
		"output1": {Type: tensor.FP16, Shape: []int64{1}, F: []float64{1}},
		"output2": {Type: tensor.Int32, Shape: []int64{1}, F: []float64{1}},
		"output3": {Type: tensor.Bytes, Shape: []int64{1}, S: []string{"test"}},
	},
	"kserve-response-all-binary-bytes": {
		"output1": {Type: tensor.FP16, Shape: []int64{1}, F: []float64{1}},
		"output2": {Type: tensor.FP16, Shape: []int64{1}, F: []float64{1}},
		"output3": {Type: tensor.Bytes, Shape: []int64{1}, S: []string{"test"}},
	},
	"kserve-response-per-output-precedence": {
		"output1": {Type: tensor.FP16, Shape: []int64{1}, F: []float64{1}},
		"output2": {Type: tensor.Int32, Shape: []int64{1}, F: []float64{1}},
		"output3": {Type: tensor.Bytes, Shape: []int64{1}, S: []string{"test"}},
	},
	"kserve-server-binary-data-output-all": {
		"fp16_output": {Type: tensor.FP16, Shape: []int64{8}, F: f16s(kserveIn...)},
		"fp32_output": {Type: tensor.FP32, Shape: []int64{8}, F: f32s(kserveIn...)},
	},
	"kserve-server-binary-precedence": {
		"fp16_output": {Type: tensor.FP16, Shape: []int64{8}, F: f16s(kserveIn...)},
		"fp32_output": {Type: tensor.FP32, Shape: []int64{8}, F: f32s(kserveIn...)},
	},
	"kserve-server-requested-output-json-nulls": {
		"fp32_output": {Type: tensor.FP32, Shape: []int64{8}, F: f32s(kserveIn...)},
	},
	"kserve-server-fp16-binary-input": {
		"str_output":  {Type: tensor.Bytes, Shape: []int64{8}, S: []string{"cat", "dog", "cat", "dog", "cat", "dog", "cat", "dog"}},
		"fp32_output": {Type: tensor.FP32, Shape: []int64{8}, F: []float64{6.80078125, 2.80078125, 4.80078125, 1.400390625, 6.0, 3.400390625, 4.5, 1.599609375}},
	},
	"triton-json-default-outputs-json": {
		"OUTPUT0": {Type: tensor.Int32, Shape: []int64{1, 16}, F: []float64{2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32}},
		"OUTPUT1": {Type: tensor.Int32, Shape: []int64{1, 16}, F: make([]float64, 16)},
	},
	// MLServer outputs, decoded against a signature declaring them rank 1
	// where the model is 1-D (the [N]→[N,1] reshape undone).
	"mlserver-numpy-1d-gets-trailing-dim": {
		"foo": {Type: tensor.Int64, Shape: []int64{3}, I: []int64{1, 2, 3}},
	},
	"mlserver-nan-becomes-null": {
		"foo": {Type: tensor.FP64, Shape: []int64{3}, F: []float64{2.3, 3.4, math.NaN()}},
	},
	"mlserver-fixed-width-bytes-concatenated": {
		"output-0": {Type: tensor.Bytes, Shape: []int64{2, 1}, S: []string{"\x01", "\x02"}},
	},
	"mlserver-base64-codec-output": {
		"output-0": {Type: tensor.Bytes, Shape: []int64{1, 1}, S: []string{"Python is fun"}},
	},
}

// mlserverSig declares MLServer's 1-D test outputs as rank 1; the 2-D
// ones keep their rank.
var mlserverSig = &tensor.Signature{Outputs: []tensor.Spec{
	{Name: "foo", DataType: tensor.Int64, Shape: []int64{-1}},
	{Name: "output-0", DataType: tensor.Bytes, Shape: []int64{-1, 1}},
}}

// responseBody rebuilds the response a vector describes and its header
// length (-1 for JSON only).
func responseBody(t testing.TB, c conformance.Case) ([]byte, int) {
	var exp struct {
		JSONText        string            `json:"json_text"`
		BinaryHex       string            `json:"binary_hex"`
		JSONLength      int               `json:"json_length"`
		Headers         map[string]string `json:"headers"`
		BodyExact       string            `json:"body_exact"`
		JSONTextDerived string            `json:"json_text_derived"`
		ResponseOutput  json.RawMessage   `json:"response_output"`
		JSON            json.RawMessage   `json:"json"`
	}
	var in struct {
		JSONText  string            `json:"json_text"`
		BinaryHex string            `json:"binary_hex"`
		Headers   map[string]string `json:"headers"`
	}
	conformance.Decode(t, c.Expected, &exp)
	conformance.Decode(t, c.Input, &in)
	switch {
	case exp.JSONText != "":
	case exp.BodyExact != "":
		return []byte(exp.BodyExact), -1
	case exp.JSONTextDerived != "":
		return []byte(exp.JSONTextDerived), -1
	case exp.ResponseOutput != nil:
		return []byte(`{"model_name":"m","id":"x","outputs":[` + string(exp.ResponseOutput) + `],"parameters":{"content_type":"np"}}`), -1
	case exp.JSON != nil:
		return []byte(`{"model_name":"m","id":"x","outputs":[` + string(exp.JSON) + `]}`), -1
	default: // a response given as the parser's input
		exp.JSONText, exp.BinaryHex, exp.Headers = in.JSONText, in.BinaryHex, in.Headers
	}
	if exp.JSONText == "" {
		t.Fatalf("%s: no response body in the vector", c.ID)
	}
	body := append([]byte(exp.JSONText), mustHex(t, exp.BinaryHex)...)
	// The announced header length must be the JSON's byte length, and
	// ParseHeaderLength must read it.
	announced := exp.JSONLength
	for k, v := range exp.Headers {
		if strings.EqualFold(k, "inference-header-content-length") {
			n, err := ParseHeaderLength(v, len(body))
			if err != nil {
				t.Fatalf("%s: %v", c.ID, err)
			}
			announced = n
		}
	}
	if announced != 0 && announced != len(exp.JSONText) {
		t.Errorf("%s: vector announces %d JSON bytes, its json_text has %d", c.ID, announced, len(exp.JSONText))
	}
	return body, len(exp.JSONText)
}

func TestConformanceResponses(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range conformance.MustLoad(t, "oip_cases.json") {
		expect, ok := responseExpectations[c.ID]
		if !ok {
			if reason, skip := conformanceSkips[c.ID]; skip {
				t.Logf("skip %s: %s", c.ID, reason)
			} else {
				t.Errorf("vector %s is neither tested nor skipped with a reason", c.ID)
			}
			continue
		}
		seen[c.ID] = true
		t.Run(c.ID, func(t *testing.T) {
			body, hl := responseBody(t, c)
			sig := (*tensor.Signature)(nil)
			if strings.HasPrefix(c.ID, "mlserver-") {
				sig = mlserverSig
			}
			outs, err := DecodeResponse(body, hl, sig, tensor.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if len(outs) != len(expect) {
				t.Fatalf("%d outputs, want %d", len(outs), len(expect))
			}
			for _, o := range outs {
				w, ok := expect[o.Name]
				if !ok {
					t.Errorf("unexpected output %q", o.Name)
					continue
				}
				g := view(o)
				if g.Type != w.Type || !reflect.DeepEqual(g.Shape, w.Shape) || !sameFloats(g.F, w.F) ||
					!reflect.DeepEqual(g.I, w.I) || (w.S != nil && !reflect.DeepEqual(g.S, w.S)) {
					t.Errorf("%s: got %+v\nwant %+v", o.Name, g, w)
				}
			}
		})
	}
	for id := range responseExpectations {
		if !seen[id] {
			t.Errorf("vector %s is missing from oip_cases.json", id)
		}
	}
}

// TestConformanceMLServerRankKept: without a signature MLServer's shapes
// are reported as sent.
func TestConformanceMLServerRankKept(t *testing.T) {
	body := []byte(`{"outputs":[{"name":"foo","shape":[3,1],"datatype":"INT64","data":[1,2,3],"parameters":{"content_type":"np"}}]}`)
	outs, err := DecodeResponse(body, -1, nil, tensor.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(outs[0].Shape, []int64{3, 1}) {
		t.Errorf("shape %v, want [3 1]", outs[0].Shape)
	}
}

// TestConformanceErrorBodies feeds the error texts of the vectors, as the
// servers wrap them ({"error": ...} or FastAPI's {"detail": [...]}), to
// DecodeError.
func TestConformanceErrorBodies(t *testing.T) {
	n := 0
	for _, c := range conformance.MustLoad(t, "oip_cases.json") {
		var exp struct {
			Status         int             `json:"status"`
			StatusFromCode int             `json:"status_from_code"`
			BodyExact      string          `json:"body_exact"`
			JSON           json.RawMessage `json:"json"`
			ErrorExact     string          `json:"error_exact_from_code"`
			ErrorContains  string          `json:"error_contains"`
			JSONPath       string          `json:"json_path"`
			Value          string          `json:"value"`
			Depth120       struct {
				ErrorContains string `json:"error_contains"`
			} `json:"depth_120"`
		}
		conformance.Decode(t, c.Expected, &exp)
		status := exp.Status
		if status == 0 {
			status = exp.StatusFromCode
		}
		var body, wantExact, wantPart string
		switch {
		case strings.HasPrefix(exp.BodyExact, `{"error"`):
			body = exp.BodyExact
			var e struct{ Error string }
			conformance.Decode(t, json.RawMessage(body), &e)
			wantExact = e.Error
		case exp.JSON != nil && strings.HasPrefix(string(exp.JSON), `{"error"`):
			body = string(exp.JSON)
			var e struct{ Error string }
			conformance.Decode(t, exp.JSON, &e)
			wantExact = e.Error
		case exp.ErrorExact != "":
			body, wantExact = `{"error":`+strconv.Quote(exp.ErrorExact)+`}`, exp.ErrorExact
		case exp.ErrorContains != "" || exp.Depth120.ErrorContains != "":
			wantPart = exp.ErrorContains + exp.Depth120.ErrorContains
			body = `{"error":` + strconv.Quote("[request id: <id_unknown>] "+wantPart) + `}`
		case exp.JSONPath == "detail[0].msg":
			body = `{"detail":[{"type":"enum","loc":["body","inputs",0,"datatype"],"msg":` + strconv.Quote(exp.Value) + `}]}`
			wantPart = exp.Value
		default:
			continue
		}
		n++
		got := DecodeError(status, "application/json", []byte(body))
		if (wantExact != "" && got != wantExact) || !strings.Contains(got, wantPart) {
			t.Errorf("%s: DecodeError(%d, %s) = %q, want %q%q", c.ID, status, body, got, wantExact, wantPart)
		}
	}
	if n < 9 {
		t.Errorf("only %d error bodies found in the vectors", n)
	}
}

// TestConformanceHexSanity guards the helpers above: the KServe FP16
// block in the vectors is the FP16 of the test input.
func TestConformanceHexSanity(t *testing.T) {
	b, _ := hex.DecodeString("cd469a41cd449a3d0046cd428044663e")
	for i, v := range kserveIn {
		h := float16.Frombits(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
		if h != float16.Fromfloat32(float32(v)) {
			t.Errorf("element %d: %v, want fp16(%v)", i, h, v)
		}
	}
}
