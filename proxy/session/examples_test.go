package session

import (
	"context"
	"strconv"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/internal/fakev2"
	"github.com/tfsbridge/tfsbridge/translate/tfexample"
)

// census is an Estimator-style classifier as a v2 server describes it.
var census = fakev2.Model{
	Name:     "census",
	Versions: []string{"1"},
	Inputs:   []fakev2.Tensor{{Name: "inputs", Datatype: "BYTES", Shape: []int64{-1}}},
	Outputs: []fakev2.Tensor{
		{Name: "classes", Datatype: "BYTES", Shape: []int64{-1, 2}},
		{Name: "scores", Datatype: "FP32", Shape: []int64{-1, 2}},
	},
}

// TestExamplesExchange runs whole classify and regress exchanges through
// the session: the examples reach the v2 infer path as the BYTES input,
// TF's request errors come first, then the model's, and the answer is
// TF's results body.
func TestExamplesExchange(t *testing.T) {
	const body = `{"examples": [{"age": 30}]}`
	example, err := tfexample.Parse([]byte(body), tfexample.Options{})
	if err != nil {
		t.Fatal(err)
	}
	header := `{"id":"e1","inputs":[{"name":"inputs","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":` +
		strconv.Itoa(4+len(example.Examples[0])) + `}}],"parameters":{"binary_data_output":true}}`
	tests := []struct {
		name, path, body string
		status           int    // 0: the request goes upstream
		msg              string // the TF error
	}{
		{name: "classify", path: "/v1/models/census:classify", body: body},
		{name: "syntax first", path: "/v1/models/nope:classify", body: "{", status: 400,
			msg: "JSON Parse error: Missing a name for object member. at offset: 1"},
		{name: "examples checked before the model", path: "/v1/models/nope:regress", body: `{"examples": [1]}`, status: 400,
			msg: "Example must be JSON object but got JSON Number"},
		{name: "unknown model", path: "/v1/models/nope:classify", body: body, status: 404,
			msg: "Servable not found for request: Latest(nope)"},
		{name: "unknown signature", path: "/v1/models/census:classify", body: `{"signature_name": "foo", "examples": [{}]}`, status: 400,
			msg: "No signature was found with the name: foo"},
		{name: "regress on a classifier", path: "/v1/models/census:regress", body: body, status: 400,
			msg: "Expected regression signature method_name to be tensorflow/serving/regress. Was: tensorflow/serving/classify"},
		{name: "classify on a predict model", path: "/v1/models/half_plus_two:classify", body: body, status: 400,
			msg: "Expected classification signature method_name to be tensorflow/serving/classify. Was: tensorflow/serving/predict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "triton", census, halfPlusTwo)
			s := New(e.cfg)
			defer s.Close()
			ctx := context.Background()
			s.RequestHeaders(ctx, "POST", tt.path, hdr{"x-request-id": "e1"}, false)
			a := s.bufferedRequest(ctx, []byte(tt.body))
			if tt.status != 0 {
				checkRespond(t, a, tt.status, tfError(tt.msg))
				return
			}
			if a.Verdict != Continue || !a.ReplaceBody {
				t.Fatalf("request body: %v %d %s", a.Verdict, a.Status, a.Body)
			}
			if ihcl, _ := a.Get(hdrIHCL); ihcl != strconv.Itoa(len(header)) || string(a.Body[:len(header)]) != header {
				t.Fatalf("v2 header %q (IHCL %s), want %q", a.Body, ihcl, header)
			}
			if got := string(a.Body[len(header)+4:]); got != string(example.Examples[0]) {
				t.Errorf("example %x, want %x", got, example.Examples[0])
			}
			resp := `{"outputs":[{"name":"classes","datatype":"BYTES","shape":[1,2],"data":["<=50K",">50K"]},` +
				`{"name":"scores","datatype":"FP32","shape":[1,2],"data":[0.75,0.25]}]}`
			s.ResponseHeaders(ctx, 200, hdr{"content-type": "application/json"}, false)
			a = s.bufferedResponse(ctx, []byte(resp))
			want := "{\n    \"results\": [[[\"<=50K\", 0.75], [\">50K\", 0.25]]\n    ]\n}"
			if a.Verdict != Continue || string(a.Body) != want {
				t.Errorf("response: %v %d\n got %q\nwant %q", a.Verdict, a.Status, a.Body, want)
			}
		})
	}
}
