package grpcmap

import (
	"errors"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/route"
)

// docs/grpc.md §6.5: what each v2 outcome becomes for the TF client.
func TestBackendError(t *testing.T) {
	latest := &Exchange{Method: Predict, Route: route.Route{Model: "m"}}
	v3 := &Exchange{Method: Predict, Route: route.Route{Model: "m", Version: 3, HasVersion: true}}
	statusV3 := &Exchange{Method: GetModelStatus, Route: route.Route{Model: "m", Version: 3, HasVersion: true}}
	statusAll := &Exchange{Method: GetModelStatus, Route: route.Route{Model: "m"}}
	tests := []struct {
		name    string
		code    int
		msg     string
		ex      *Exchange
		want    apierr.Code
		wantMsg string
	}{
		{"Triton unknown model", 5, "Request for unknown model: 'm' is not found", latest, apierr.NotFound, "Servable not found for request: Latest(m)"},
		{"Triton unknown version", 5, "Request for unknown model: 'm' version 3 is not found", v3, apierr.NotFound, "Servable not found for request: Specific(m, 3)"},
		{"MLServer unknown model", 5, "Model m with version  not found", latest, apierr.NotFound, "Servable not found for request: Latest(m)"},
		{"Triton version not ready", 14, "Request for unknown model: 'm' version 3 is not at ready state", v3, apierr.NotFound, "Servable not found for request: Specific(m, 3)"},
		{"MLServer version not ready (its HTTP 400)", 3, "Model m with version  is not ready yet.", latest, apierr.NotFound, "Servable not found for request: Latest(m)"},
		{"MLServer not ready, a version asked", 3, "Model m with version 3 is not ready yet.", v3, apierr.NotFound, "Servable not found for request: Specific(m, 3)"},
		{"MLServer status of a version not ready", 3, "Model m with version 3 is not ready yet.", statusV3, apierr.NotFound, "Could not find version 3 of model m"},
		{"MLServer ModelReady, unknown model (grpcio's UNKNOWN)", 2, "Unexpected <class 'mlserver.errors.ModelNotFound'>: Model m with version 3 not found", statusV3, apierr.NotFound, "Could not find version 3 of model m"},
		{"a model's own error mentioning readiness", 3, "input x is not ready yet.", latest, apierr.InvalidArgument, "input x is not ready yet."},
		{"KServe not ready", 14, "Model with name m is not ready.", latest, apierr.NotFound, "Servable not found for request: Latest(m)"},
		{"server unavailable", 14, "connection refused", latest, apierr.Unavailable, "connection refused"},
		{"shape error", 3, "unexpected shape for input 'x' for model 'm'. Expected [-1,2], got [2]", latest, apierr.InvalidArgument, "unexpected shape for input 'x' for model 'm'. Expected [-1,2], got [2]"},
		{"MLServer 422", 9, "1 validation error", latest, apierr.InvalidArgument, "1 validation error"},
		{"model exception", 13, "Internal server error", latest, apierr.Internal, "Internal server error"},
		{"KServe 8 MiB cap", 8, "Received message larger than max (9000000 vs. 8388608)", latest, apierr.ResourceExhausted, "Received message larger than max (9000000 vs. 8388608)"},
		{"deadline", 4, "Deadline Exceeded", latest, apierr.DeadlineExceeded, "Deadline Exceeded"},
		{"cancelled", 1, "Cancelled", latest, apierr.Cancelled, "Cancelled"},
		{"unimplemented", 12, "Method not found", latest, apierr.Unimplemented, "Method not found"},
		{"unknown", 2, "boom", latest, apierr.Unknown, "boom"},
		{"status, version", 5, "x", statusV3, apierr.NotFound, "Could not find version 3 of model m"},
		{"status, all versions", 5, "x", statusAll, apierr.NotFound, "Could not find any versions of model m"},
		{"a code gRPC does not define", 42, "odd", latest, apierr.Unknown, "odd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, BackendError(tt.code, tt.msg, tt.ex), tt.want, tt.wantMsg)
		})
	}
}

func TestStatus(t *testing.T) {
	long := strings.Repeat("é", 600) // 1200 bytes
	tests := []struct {
		err  error
		code int
		msg  string
	}{
		{nil, 0, ""},
		{apierr.New(apierr.InvalidArgument, "bad"), 3, "bad"},
		{apierr.New(apierr.BadGateway, "invalid ModelInferResponse"), 13, "invalid ModelInferResponse"},
		{apierr.New(apierr.PayloadTooLarge, "too big"), 8, "too big"},
		{errors.New("plain"), 13, "plain"},
		{apierr.New(apierr.NotFound, long), 5, long[:1024] + "...TRUNCATED"},
		{apierr.New(apierr.NotFound, long[:1024]), 5, long[:1024]},
	}
	for _, tt := range tests {
		code, msg := Status(tt.err)
		if code != tt.code || msg != tt.msg {
			t.Errorf("Status(%v) = %d %q, want %d %q", tt.err, code, msg, tt.code, tt.msg)
		}
	}
	code, msg := Status(Unimplemented(MultiInference))
	if code != 12 || !strings.HasPrefix(msg, "MultiInference is not supported") {
		t.Errorf("Unimplemented: %d %q", code, msg)
	}
}

func TestParseMethod(t *testing.T) {
	for m := Predict; m <= HandleReloadConfigRequest; m++ {
		got, ok := ParseMethod(m.Path())
		if !ok || got != m {
			t.Errorf("ParseMethod(%q) = %v, %v", m.Path(), got, ok)
		}
	}
	for _, p := range []string{"", "/tensorflow.serving.PredictionService/predict", "/tensorflow.serving.ModelService/Predict", "/inference.GRPCInferenceService/ModelInfer"} {
		if m, ok := ParseMethod(p); ok {
			t.Errorf("ParseMethod(%q) = %v", p, m)
		}
	}
	if GetModelStatus.String() != "GetModelStatus" || Predict.String() != "Predict" {
		t.Errorf("names %s %s", GetModelStatus, Predict)
	}
}
