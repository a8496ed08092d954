package tfresponse

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// skipped are the response vectors this package does not implement, by id.
var skipped = map[string]string{
	// DT_COMPLEX64 has no tensor.DataType: v2 has no complex type, so no
	// server can return one. The unwritable-datatype path and its exact
	// message are tested with tensor.Invalid in predict_test.go.
	"resp-err-complex64": "complex64 cannot be represented (v2 has no complex type)",
}

// statusFixture is the model state of TF Serving's handler test
// (http_rest_api_handler_test.cc): the model the status vectors query
// has version 123 loaded.
var statusFixture = map[string][]VersionStatus{
	"saved_model_half_plus_two_2_versions": {{Version: "123", State: "AVAILABLE", ErrorCode: "OK"}},
}

type vectorTensor struct {
	Name   string            `json:"name"`
	DType  string            `json:"dtype"`
	Shape  []int64           `json:"shape"`
	Values []json.RawMessage `json:"values"`
}

type vectorInput struct {
	RequestFormat string         `json:"request_format"`
	Outputs       []vectorTensor `json:"output_tensors"`
	Status        *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"status"`
	Request *struct {
		Method string `json:"method"`
		Path   string `json:"path"`
	} `json:"request"`
	// Classify and regress results: [[[label, score], …] per example],
	// [value, …], or "result": "empty" for a result without examples.
	ClassificationResult [][][]json.RawMessage `json:"classification_result"`
	RegressionResult     []json.RawMessage     `json:"regression_result"`
	Result               string                `json:"result"`
}

type vectorExpected struct {
	HTTPStatus int    `json:"http_status"`
	JSONText   string `json:"json_text"`
	Error      *struct {
		HTTPStatus   int    `json:"http_status"`
		Code         string `json:"code"`
		Message      string `json:"message"`
		ResponseBody string `json:"response_body"`
	} `json:"error"`
}

func TestConformanceResponses(t *testing.T) {
	ran := 0
	for _, c := range conformance.MustLoad(t, "tfserving_cases.json") {
		if c.Direction != "response" {
			continue
		}
		t.Run(c.ID, func(t *testing.T) {
			if why, ok := skipped[c.ID]; ok {
				t.Skip(why)
			}
			var in vectorInput
			var exp vectorExpected
			conformance.Decode(t, c.Input, &in)
			conformance.Decode(t, c.Expected, &exp)
			switch {
			case in.Outputs != nil:
				checkPredictVector(t, in, exp)
			case in.Status != nil:
				if got := string(Error(nil, in.Status.Message)); got != exp.JSONText {
					t.Errorf("Error body:\n got %q\nwant %q", got, exp.JSONText)
				}
			case in.ClassificationResult != nil || in.Result == "empty":
				classes, scores := classificationTensors(t, in.ClassificationResult)
				got, err := Classify([]byte("prefix"), classes, scores, len(in.ClassificationResult))
				checkBody(t, got, err, exp)
			case in.RegressionResult != nil:
				got, err := Regress([]byte("prefix"), regressionTensor(t, in.RegressionResult), len(in.RegressionResult))
				checkBody(t, got, err, exp)
			case in.Request != nil:
				name := strings.Split(strings.TrimPrefix(in.Request.Path, "/v1/models/"), "/")[0]
				versions, ok := statusFixture[name]
				if !ok {
					t.Fatalf("no fixture for model %q", name)
				}
				if got := string(Status(nil, versions)); got != exp.JSONText {
					t.Errorf("Status body:\n got %q\nwant %q", got, exp.JSONText)
				}
			default:
				t.Fatalf("unrecognised response vector input: %s", c.Input)
			}
			ran++
		})
	}
	if ran < 15 {
		t.Fatalf("only %d response vectors ran", ran)
	}
}

func checkPredictVector(t *testing.T, in vectorInput, exp vectorExpected) {
	t.Helper()
	format := map[string]tfjson.Format{"row": tfjson.Row, "columnar": tfjson.Columnar}[in.RequestFormat]
	if format == 0 {
		t.Fatalf("unknown request_format %q", in.RequestFormat)
	}
	outputs := make([]tensor.Tensor, len(in.Outputs))
	for i, v := range in.Outputs {
		outputs[i] = vectorToTensor(t, v)
	}
	got, err := Predict([]byte("prefix"), outputs, format)
	checkBody(t, got, err, exp)
}

// checkBody compares what a writer called with dst "prefix" returned
// with the vector's body or error.
func checkBody(t *testing.T, got []byte, err error, exp vectorExpected) {
	t.Helper()
	if exp.Error != nil {
		var e *apierr.Error
		if !errors.As(err, &e) {
			t.Fatalf("Predict error = %v (%T), want *apierr.Error %q", err, err, exp.Error.Message)
		}
		if e.Msg != exp.Error.Message || e.Code.String() != exp.Error.Code || e.HTTPStatus() != exp.Error.HTTPStatus {
			t.Errorf("error = %s %q (HTTP %d), want %s %q (HTTP %d)", e.Code, e.Msg, e.HTTPStatus(), exp.Error.Code, exp.Error.Message, exp.Error.HTTPStatus)
		}
		if body := string(Error(nil, e.Msg)); body != exp.Error.ResponseBody {
			t.Errorf("error body:\n got %q\nwant %q", body, exp.Error.ResponseBody)
		}
		if string(got) != "prefix" {
			t.Errorf("dst changed on error: %q", got)
		}
		return
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if want := "prefix" + exp.JSONText; string(got) != want {
		t.Errorf("body:\n got %q\nwant %q", got, want)
	}
}

// classificationTensors builds the classes (BYTES [N,K]) and scores (FP32
// [N,K]) outputs a classification result was made from.
func classificationTensors(t *testing.T, result [][][]json.RawMessage) (classes, scores *tensor.Tensor) {
	t.Helper()
	k := 0
	if len(result) > 0 {
		k = len(result[0])
	}
	shape := []int64{int64(len(result)), int64(k)}
	classes = &tensor.Tensor{Name: "classes", DataType: tensor.Bytes, Shape: shape}
	scores = &tensor.Tensor{Name: "scores", DataType: tensor.FP32, Shape: shape}
	for _, example := range result {
		for _, pair := range example {
			var label string
			conformance.Decode(t, pair[0], &label)
			classes.Strings = append(classes.Strings, []byte(label))
			scores.Data = binary.LittleEndian.AppendUint32(scores.Data, math.Float32bits(float32(conformance.MustFloat(t, pair[1], 32))))
		}
	}
	return classes, scores
}

// regressionTensor builds the FP32 [N] outputs tensor of a regression.
func regressionTensor(t *testing.T, values []json.RawMessage) *tensor.Tensor {
	t.Helper()
	out := &tensor.Tensor{Name: "outputs", DataType: tensor.FP32, Shape: []int64{int64(len(values))}}
	for _, v := range values {
		out.Data = binary.LittleEndian.AppendUint32(out.Data, math.Float32bits(float32(conformance.MustFloat(t, v, 32))))
	}
	return out
}

// vectorToTensor builds a tensor from a vector's output_tensors entry:
// values row-major, floats as JSON literals or "NaN"/"Infinity"/
// "-Infinity"/"-0.0", DT_STRING values as strings.
func vectorToTensor(t *testing.T, v vectorTensor) tensor.Tensor {
	t.Helper()
	dt, ok := tensor.ParseTF(v.DType)
	if !ok {
		t.Fatalf("unknown dtype %s", v.DType)
	}
	out := tensor.Tensor{Name: v.Name, DataType: dt, Shape: v.Shape}
	if dt == tensor.Bytes {
		out.Strings = make([][]byte, 0, len(v.Values))
		for _, raw := range v.Values {
			var s string
			conformance.Decode(t, raw, &s)
			out.Strings = append(out.Strings, []byte(s))
		}
		return out
	}
	size := dt.Size()
	out.Data = make([]byte, len(v.Values)*size)
	for i, raw := range v.Values {
		b := out.Data[i*size:]
		switch dt {
		case tensor.FP32:
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(conformance.MustFloat(t, raw, 32))))
		case tensor.FP64:
			binary.LittleEndian.PutUint64(b, math.Float64bits(conformance.MustFloat(t, raw, 64)))
		case tensor.Bool:
			var x bool
			conformance.Decode(t, raw, &x)
			if x {
				b[0] = 1
			}
		default:
			n, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil {
				t.Fatalf("value %s of %s: %v", raw, v.DType, err)
			}
			for j := range size {
				b[j] = byte(n >> (8 * j))
			}
		}
	}
	return out
}
