package session

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
	"github.com/tfsbridge/tfsbridge/proxy/internal/fakev2"
	"github.com/tfsbridge/tfsbridge/proxy/internal/grpctest"
	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// TF-client-shaped messages (package grpctest).
var (
	f32Content  = grpctest.F32Content
	grpcFrame   = grpctest.Frame
	tfSpec      = grpctest.Spec
	predictMsg  = grpctest.Predict
	metadataMsg = grpctest.Metadata
)

const predictPath = grpctest.PredictPath

// grpcHeaders are the request headers grpc-python sends.
func grpcHeaders(path string, extra ...string) hdr {
	h := hdr{":path": path, "content-type": "application/grpc", "te": "trailers", "grpc-accept-encoding": "identity,deflate,gzip", "grpc-timeout": "10S"}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

// checkGRPCStatus asserts a trailers-only refusal with code and message.
func checkGRPCStatus(t *testing.T, a Action, code, msg string) {
	t.Helper()
	if a.Verdict != Respond || a.Status != 200 {
		t.Fatalf("action = %v %d, want a trailers-only respond 200", a.Verdict, a.Status)
	}
	if ct, _ := a.Get("content-type"); ct != "application/grpc" {
		t.Errorf("content-type = %q", ct)
	}
	gotCode, _ := a.Get("grpc-status")
	gotMsg, _ := a.Get("grpc-message")
	if gotCode != code || DecodeGRPCMessage(gotMsg) != msg {
		t.Errorf("status = %s %q, want %s %q", gotCode, DecodeGRPCMessage(gotMsg), code, msg)
	}
}

// grpcRequest runs a gRPC call's request headers and whole body.
func grpcRequestAction(t *testing.T, e *env, h hdr, body []byte) (*Session, Action) {
	t.Helper()
	s := New(e.cfg)
	t.Cleanup(s.Close)
	a := s.RequestHeaders(context.Background(), "POST", h[":path"], h, false)
	if a.Verdict != Continue {
		return s, a
	}
	if v, _ := a.Get("grpc-accept-encoding"); v != "identity" {
		t.Errorf("request headers: grpc-accept-encoding = %q, want identity", v)
	}
	return s, s.RequestChunk(context.Background(), body, true, Whole)
}

// predictSent is a session (Triton kind) that has taken a TF Predict of
// half_plus_two and awaits the v2 answer.
func predictSent(t *testing.T) *Session {
	t.Helper()
	s, a := grpcRequestAction(t, newEnv(t, "triton"), grpcHeaders(predictPath), grpcFrame(predictMsg(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", f32Content)))
	if a.Verdict != Continue {
		t.Fatalf("request: %v", a.Verdict)
	}
	return s
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func TestGRPCRequestRefusals(t *testing.T) {
	hpt := tfgrpc.ModelSpec{Name: "half_plus_two"}
	long := strings.Repeat("x", 2000)
	gz := gzipped(t, predictMsg(tfgrpc.ModelSpec{Name: "nope"}, "x", f32Content))
	compressed := append([]byte{1, 0, 0, 0, 0}, gz...)
	binary.BigEndian.PutUint32(compressed[1:5], uint32(len(gz)))
	tests := []struct {
		name      string
		h         hdr
		body      []byte
		code, msg string
	}{
		{"unknown model", grpcHeaders(predictPath), grpcFrame(predictMsg(tfgrpc.ModelSpec{Name: "nope"}, "x", f32Content)),
			"5", "Servable not found for request: Latest(nope)"},
		{"unknown version", grpcHeaders(predictPath), grpcFrame(predictMsg(tfgrpc.ModelSpec{Name: "half_plus_two", Version: 7, HasVersion: true}, "x", f32Content)),
			"5", "Servable not found for request: Specific(half_plus_two, 7)"},
		{"long model name truncated", grpcHeaders(predictPath), grpcFrame(predictMsg(tfgrpc.ModelSpec{Name: long}, "x", f32Content)),
			"5", ("Servable not found for request: Latest(" + long + ")")[:1024] + "...TRUNCATED"},
		{"unknown label", grpcHeaders(predictPath), grpcFrame(predictMsg(tfgrpc.ModelSpec{Name: "half_plus_two", VersionLabel: "canary"}, "x", f32Content)),
			"3", "Unrecognized servable version label: canary"},
		{"missing model spec", grpcHeaders(predictPath), grpcFrame(nil), "3", "Missing ModelSpec"},
		{"unknown signature", grpcHeaders(predictPath), grpcFrame(predictMsg(tfgrpc.ModelSpec{Name: "half_plus_two", SignatureName: "other"}, "x", f32Content)),
			"9", `Serving signature key "other" not found.`},
		{"wrong input alias", grpcHeaders(predictPath), grpcFrame(predictMsg(hpt, "images", f32Content)),
			"3", "Signature input alias: x(feed name: x:0) not found in request and no default value provided. Inputs expected to be in the request {images}, or default input alias set: "},
		{"unreadable tensor", grpcHeaders(predictPath), grpcFrame(predictMsg(hpt, "x", f32Content[:len(f32Content)-4])),
			"13", ""},
		{"metadata without field", grpcHeaders("/tensorflow.serving.PredictionService/GetModelMetadata"), grpcFrame(tfSpec(nil, hpt)),
			"3", "GetModelMetadataRequest must specify at least one metadata_field"},
		{"compressed, inflated", grpcHeaders(predictPath, "grpc-encoding", "gzip"), compressed,
			"5", "Servable not found for request: Latest(nope)"},
		{"compressed flag without encoding", grpcHeaders(predictPath), compressed,
			"13", "Request message is compressed but no grpc-encoding was given"},
		{"truncated message", grpcHeaders(predictPath), grpcFrame(predictMsg(hpt, "x", f32Content))[:20],
			"13", "Request is not one gRPC message: its prefix announces 42 bytes, the body holds 15"},
		{"two messages", grpcHeaders(predictPath), append(grpcFrame(nil), grpcFrame(nil)...),
			"13", "Request is not one gRPC message: its prefix announces 0 bytes, the body holds 5"},
		{"no message", grpcHeaders(predictPath), nil, "13", "Request has no complete gRPC message (0 bytes)"},
		{"over the body limit", grpcHeaders(predictPath), grpcFrame(make([]byte, 1<<20)),
			"8", "Request body exceeds the limit of 1048576 bytes"},
		{"multi inference", grpcHeaders("/tensorflow.serving.PredictionService/MultiInference"), nil,
			"12", "MultiInference is not supported: tfsbridge translates to a v2 inference server, which has no equivalent"},
		{"reload config", grpcHeaders("/tensorflow.serving.ModelService/HandleReloadConfigRequest"), nil,
			"12", "HandleReloadConfigRequest is not supported: tfsbridge translates to a v2 inference server, which has no equivalent"},
		{"unknown method", grpcHeaders("/tensorflow.serving.PredictionService/Explain"), nil,
			"12", "unknown method PredictionService/Explain"},
		{"unknown encoding", grpcHeaders(predictPath, "grpc-encoding", "snappy"), nil,
			"12", `grpc: Decompressor is not installed for grpc-encoding "snappy"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "triton")
			s, a := grpcRequestAction(t, e, tt.h, tt.body)
			checkGRPCStatus(t, a, tt.code, tt.msg)
			if !s.Answered() {
				t.Error("a refused exchange is not answered")
			}
			if tt.h["grpc-encoding"] == "snappy" {
				if v, _ := a.Get("grpc-accept-encoding"); v != "identity,deflate,gzip" {
					t.Errorf("grpc-accept-encoding = %q", v)
				}
			}
		})
	}
}

// v2Answer is a ModelInferResponse of half_plus_two's y.
func v2Answer(vals ...float32) ([]byte, []tensor.Tensor) {
	out := []tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{int64(len(vals))}, Data: f32le(vals...)}}
	return oipgrpc.AppendInferResponse(nil, oipgrpc.Head{ModelName: "half_plus_two", ModelVersion: "10"}, out), out
}

func TestGRPCPredictExchange(t *testing.T) {
	e := newEnv(t, "triton")
	ctx := context.Background()
	s, a := grpcRequestAction(t, e, grpcHeaders(predictPath, "content-length", "50", "grpc-encoding", "identity"),
		grpcFrame(predictMsg(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", f32Content)))
	if a.Verdict != Continue || !a.ReplaceBody {
		t.Fatalf("request body: %v %s", a.Verdict, a.Body)
	}
	if p, _ := a.Get(":path"); p != "/inference.GRPCInferenceService/ModelInfer" {
		t.Errorf(":path = %q", p)
	}
	if !slicesHas(a.Remove, "content-length") || !slicesHas(a.Remove, "grpc-encoding") || a.ClearRouteCache {
		t.Errorf("remove = %v, clear = %v", a.Remove, a.ClearRouteCache)
	}
	if n := binary.BigEndian.Uint32(a.Body[1:5]); a.Body[0] != 0 || int(n) != len(a.Body)-5 {
		t.Fatalf("v2 prefix % x", a.Body[:5])
	}
	req, err := oipgrpc.DecodeInferRequest(a.Body[5:], tensor.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if req.ModelName != "half_plus_two" || len(req.Tensors) != 1 || req.Tensors[0].Name != "x" || !bytes.Equal(req.Tensors[0].Data, f32le(1, 2)) {
		t.Fatalf("v2 request = %+v", req)
	}

	a = s.ResponseHeaders(ctx, 200, hdr{"content-type": "application/grpc", "grpc-encoding": "identity"}, false)
	if a.Verdict != Continue || !slicesHas(a.Remove, "grpc-encoding") {
		t.Fatalf("response headers: %+v", a)
	}
	v2, outs := v2Answer(2.5, 3)
	// The message arrives in two BUFFERED-less pieces would be Pending;
	// BUFFERED gives it whole, with the trailers to come (end false).
	a = s.ResponseChunk(ctx, grpcFrame(v2), false, Whole)
	want := grpcFrame(tfgrpc.AppendPredictResponse(nil, outs, tfgrpc.ModelSpec{Name: "half_plus_two", Version: 10, HasVersion: true, SignatureName: "serving_default"}, tfgrpc.TypedFields))
	if a.Verdict != Continue || !bytes.Equal(a.Body, want) {
		t.Fatalf("response body: %v\n got % x\nwant % x", a.Verdict, a.Body, want)
	}
	if s.Answered() {
		t.Error("answered before the trailers")
	}
	a = s.ResponseTrailers(ctx, hdr{"grpc-status": "0"})
	if a.Verdict != Continue || len(a.Set) != 0 || !s.Answered() {
		t.Errorf("trailers: %+v, answered %v", a, s.Answered())
	}
	if n := verbCount(t, e, "grpc_predict", "200"); n != 1 {
		t.Errorf("grpc_predict 200 counted %v times", n)
	}
}

func slicesHas(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestGRPCStatusRows is spec §6.5: each v2 outcome, in the trailers and
// in a trailers-only answer, becomes TF Serving's status.
func TestGRPCStatusRows(t *testing.T) {
	tests := []struct {
		name            string
		code, msg       string
		wantCode, wantM string
	}{
		{"not found", "5", "Request for unknown model: 'half_plus_two' is not found", "5", "Servable not found for request: Latest(half_plus_two)"},
		{"triton not ready", "14", "Request for unknown model: 'half_plus_two' version 1 is not at ready state", "5", "Servable not found for request: Latest(half_plus_two)"},
		{"kserve not ready", "14", "Model with name half_plus_two is not ready.", "5", "Servable not found for request: Latest(half_plus_two)"},
		{"mlserver failed precondition", "9", "Model input x: shape mismatch", "3", "Model input x: shape mismatch"},
		{"shape error", "3", "unexpected shape for input 'x' for model 'half_plus_two'. Expected [-1], got [2,1]", "3", "unexpected shape for input 'x' for model 'half_plus_two'. Expected [-1], got [2,1]"},
		{"model exception", "13", "Traceback: ValueError", "13", "Traceback: ValueError"},
		{"resource exhausted", "8", "Received message larger than max (9000000 vs. 8388608)", "8", "Received message larger than max (9000000 vs. 8388608)"},
		{"deadline", "4", "Deadline Exceeded", "4", "Deadline Exceeded"},
		{"cancelled", "1", "Cancelled", "1", "Cancelled"},
		{"unavailable", "14", "failed to connect to all addresses", "14", "failed to connect to all addresses"},
		{"unimplemented", "12", "", "12", ""},
		{"percent-encoded", "13", "caf%C3%A9 100%25", "13", "café 100%"},
		{"long", "13", strings.Repeat("e", 1500), "13", strings.Repeat("e", 1024) + "...TRUNCATED"},
		{"status OK without answer", "0", "", "", ""},
		{"no status", "", "", "2", ""},
	}
	for _, tt := range tests {
		for _, trailersOnly := range []bool{false, true} {
			name := tt.name + map[bool]string{false: ", trailers", true: ", trailers-only"}[trailersOnly]
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				s := predictSent(t)
				st := hdr{"content-type": "application/grpc"}
				if tt.code != "" {
					st["grpc-status"] = tt.code
				}
				if tt.msg != "" {
					st["grpc-message"] = tt.msg
				}
				st["grpc-status-details-bin"] = "CAUSBm5vcGU"
				var a Action
				if trailersOnly {
					a = s.ResponseHeaders(ctx, 200, st, true)
				} else {
					s.ResponseHeaders(ctx, 200, hdr{"content-type": "application/grpc"}, false)
					if a = s.ResponseChunk(ctx, nil, false, Whole); a.Verdict != Continue || a.ReplaceBody {
						t.Fatalf("empty body: %+v", a)
					}
					a = s.ResponseTrailers(ctx, st)
				}
				if !s.Answered() || a.Verdict != Continue {
					t.Fatalf("verdict %v, answered %v", a.Verdict, s.Answered())
				}
				code, _ := a.Get("grpc-status")
				m, hasM := a.Get("grpc-message")
				if code != tt.wantCode || DecodeGRPCMessage(m) != tt.wantM {
					t.Errorf("status = %s %q, want %s %q", code, DecodeGRPCMessage(m), tt.wantCode, tt.wantM)
				}
				if tt.wantCode != "" && (!slicesHas(a.Remove, "grpc-status-details-bin") || (tt.wantM == "" && (hasM || !slicesHas(a.Remove, "grpc-message")))) {
					t.Errorf("remove = %v", a.Remove)
				}
			})
		}
	}
}

func TestGRPCMetadataAndStatusPaths(t *testing.T) {
	tests := []struct {
		name, path string
		msg        []byte
		v2Path     string
		v2Model    string
		v2Version  string
	}{
		{"metadata", "/tensorflow.serving.PredictionService/GetModelMetadata", metadataMsg(tfgrpc.ModelSpec{Name: "half_plus_two"}),
			"/inference.GRPCInferenceService/ModelMetadata", "half_plus_two", ""},
		{"status", "/tensorflow.serving.ModelService/GetModelStatus", tfSpec(nil, tfgrpc.ModelSpec{Name: "half_plus_two"}),
			"/inference.GRPCInferenceService/ModelMetadata", "half_plus_two", ""},
		{"status of a version", "/tensorflow.serving.ModelService/GetModelStatus", tfSpec(nil, tfgrpc.ModelSpec{Name: "half_plus_two", Version: 2, HasVersion: true}),
			"/inference.GRPCInferenceService/ModelReady", "half_plus_two", "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "triton")
			s, a := grpcRequestAction(t, e, grpcHeaders(tt.path), grpcFrame(tt.msg))
			if a.Verdict != Continue {
				t.Fatalf("verdict %v %+v", a.Verdict, a.Set)
			}
			if p, _ := a.Get(":path"); p != tt.v2Path {
				t.Errorf(":path = %q, want %q", p, tt.v2Path)
			}
			name, version, err := oipgrpc.DecodeModelRequest(a.Body[5:])
			if err != nil || name != tt.v2Model || version != tt.v2Version {
				t.Errorf("v2 request = %q %q %v", name, version, err)
			}
			ctx := context.Background()
			s.ResponseHeaders(ctx, 200, hdr{"content-type": "application/grpc"}, false)
			var v2 []byte
			if tt.v2Version != "" {
				v2 = oipgrpc.AppendModelReady(nil, true)
			} else {
				v2 = oipgrpc.AppendModelMetadata(nil, &tensor.Signature{Model: "half_plus_two", Versions: []string{"1", "10"},
					Inputs: []tensor.Spec{{Name: "x", DataType: tensor.FP32, Shape: []int64{-1}}}})
			}
			a = s.ResponseChunk(ctx, grpcFrame(v2), false, Whole)
			if a.Verdict != Continue || !a.ReplaceBody || len(a.Body) < 5 {
				t.Fatalf("response: %+v", a)
			}
			if tt.name == "status of a version" {
				// model_version_status {version: 2, state: AVAILABLE, status {}}
				want := tfgrpc.AppendStatusResponse(nil, []tfgrpc.VersionStatus{{Version: 2, State: tfgrpc.StateAvailable}})
				if !bytes.Equal(a.Body[5:], want) {
					t.Errorf("status answer % x, want % x", a.Body[5:], want)
				}
			}
		})
	}
}

// TestGRPCStreamed feeds a FULL_DUPLEX_STREAMED exchange: the request in
// small chunks, the response message split across chunks and re-buffered.
func TestGRPCStreamed(t *testing.T) {
	e := newEnv(t, "triton")
	ctx := context.Background()
	s := New(e.cfg)
	defer s.Close()
	h := grpcHeaders(predictPath)
	if a := s.RequestHeaders(ctx, "POST", predictPath, h, false); a.Verdict != Continue {
		t.Fatal(a.Verdict)
	}
	body := grpcFrame(predictMsg(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", f32Content))
	rec := &recordSink{}
	var a Action
	for i := 0; i < len(body); i += 7 {
		end := i+7 >= len(body)
		a = s.RequestChunk(ctx, body[i:min(i+7, len(body))], end, rec)
		if !end && a.Verdict != Pending {
			t.Fatalf("chunk %d: %v", i, a.Verdict)
		}
	}
	if a.Verdict != Continue || len(rec.headers) != 1 || rec.ends != 1 {
		t.Fatalf("request: %v, %d headers, ended %v", a.Verdict, len(rec.headers), rec.ends)
	}
	if p, _ := rec.headers[0].Get(":path"); p != "/inference.GRPCInferenceService/ModelInfer" {
		t.Errorf(":path = %q", p)
	}
	s.ResponseHeaders(ctx, 200, hdr{"content-type": "application/grpc"}, false)
	v2, _ := v2Answer(2.5, 3)
	frame := grpcFrame(v2)
	out := &recordSink{}
	for i := 0; i < len(frame); i += 9 {
		a = s.ResponseChunk(ctx, frame[i:min(i+9, len(frame))], false, out)
	}
	if a.Verdict != Continue || len(out.headers) != 1 || out.ends != 0 {
		t.Fatalf("response: %v, %d headers, ended %v (the trailers end it)", a.Verdict, len(out.headers), out.ends)
	}
	if len(out.body) < 5 || binary.BigEndian.Uint32(out.body[1:5]) != uint32(len(out.body)-5) {
		t.Fatalf("streamed TF answer % x", out.body)
	}
	if a = s.ResponseTrailers(ctx, hdr{"grpc-status": "0"}); !s.Answered() {
		t.Fatal("not answered after the trailers")
	}
}

func TestGRPCModelMap(t *testing.T) {
	e, _ := mapEnv(t)
	s, a := grpcRequestAction(t, e, grpcHeaders(predictPath, "x-tfsbridge-server", "evil"),
		grpcFrame(predictMsg(tfgrpc.ModelSpec{Name: "far"}, "x", f32Content)))
	if a.Verdict != Continue {
		t.Fatalf("verdict %v %+v", a.Verdict, a.Set)
	}
	if v, _ := a.Get("x-tfsbridge-server"); v != "remote" || !a.ClearRouteCache {
		t.Errorf("server header %q, clear %v", v, a.ClearRouteCache)
	}
	if s.UpstreamGRPC() != "remote.invalid:8001" {
		t.Errorf("UpstreamGRPC = %q", s.UpstreamGRPC())
	}
	req, err := oipgrpc.DecodeInferRequest(a.Body[5:], tensor.Limits{})
	if err != nil || req.ModelName != "half_plus_two" {
		t.Fatalf("v2 request %+v %v", req, err)
	}

	// A renamed model with a label: the v2 name, the label's version, and
	// the TF alias mapped onto the v2 input.
	s, a = grpcRequestAction(t, e, grpcHeaders(predictPath),
		grpcFrame(predictMsg(tfgrpc.ModelSpec{Name: "hpt", VersionLabel: "stable"}, "value", f32Content)))
	if a.Verdict != Continue {
		checkGRPCStatus(t, a, "0", "")
	}
	req, err = oipgrpc.DecodeInferRequest(a.Body[5:], tensor.Limits{})
	if err != nil || req.ModelName != "half_plus_two" || req.ModelVersion != "2" || req.Tensors[0].Name != "x" {
		t.Fatalf("v2 request %+v %v", req, err)
	}
	if s.UpstreamGRPC() != "" || a.ClearRouteCache {
		t.Errorf("default server: upstream %q, clear %v", s.UpstreamGRPC(), a.ClearRouteCache)
	}
}

// verbCount is tfsbridge_requests_total for verb and code.
func verbCount(t *testing.T, e *env, verb, code string) float64 {
	t.Helper()
	mfs, err := e.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "tfsbridge_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["verb"] == verb && labels["code"] == code {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// TestGRPCAdmission: a message over the in-flight budget is refused with
// TF's 503 as a gRPC UNAVAILABLE, and what it held is released.
func TestGRPCAdmission(t *testing.T) {
	e := newEnv(t, "triton")
	e.cfg.Admission = admission.New(1<<10, e.metrics)
	tp := append([]byte(nil), f32Content...)
	big := predictMsg(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", append(tp, make([]byte, 4096)...))
	s, a := grpcRequestAction(t, e, grpcHeaders(predictPath), grpcFrame(big))
	code, _ := a.Get("grpc-status")
	msg, _ := a.Get("grpc-message")
	if a.Verdict != Respond || code != "14" || !strings.HasPrefix(DecodeGRPCMessage(msg), "tfsbridge is over its in-flight memory budget") {
		t.Fatalf("action %v %s %q", a.Verdict, code, DecodeGRPCMessage(msg))
	}
	if h := s.Admission().Held(); h != 0 {
		t.Errorf("a refused exchange still holds %d bytes", h)
	}
}

// TestGRPCOtherServices: native v2 gRPC calls pass as their REST twins
// do; the rest are UNIMPLEMENTED, never a JSON 404.
func TestGRPCOtherServices(t *testing.T) {
	for _, tt := range []struct {
		path   string
		policy Passthrough
		pass   bool
	}{
		{"/inference.GRPCInferenceService/ModelInfer", PassthroughInference, true},
		{"/inference.GRPCInferenceService/ServerReady", PassthroughInference, true},
		{"/inference.GRPCInferenceService/RepositoryModelUnload", PassthroughInference, false},
		{"/inference.GRPCInferenceService/RepositoryModelUnload", PassthroughAll, true},
		{"/inference.GRPCInferenceService/ModelInfer", PassthroughNone, false},
		{"/grpc.health.v1.Health/Check", PassthroughInference, false},
	} {
		e := newEnv(t, "triton")
		e.cfg.Passthrough = tt.policy
		s := New(e.cfg)
		a := s.RequestHeaders(context.Background(), "POST", tt.path, grpcHeaders(tt.path), false)
		if tt.pass {
			if a.Verdict != PassThrough {
				t.Errorf("%s (%v): %v, want pass-through", tt.path, tt.policy, a.Verdict)
			}
		} else {
			checkGRPCStatus(t, a, "12", "unknown service or method "+tt.path)
		}
		s.Close()
	}
}

// TestGRPCExamples: Classify and Regress carry their serialized
// tf.Examples as the BYTES input "inputs" and answer TF's messages.
func TestGRPCExamples(t *testing.T) {
	clf := fakev2.Model{Name: "clf", Versions: []string{"1"},
		Inputs:  []fakev2.Tensor{{Name: "inputs", Datatype: "BYTES", Shape: []int64{-1}}},
		Outputs: []fakev2.Tensor{{Name: "classes", Datatype: "BYTES", Shape: []int64{-1, -1}}, {Name: "scores", Datatype: "FP32", Shape: []int64{-1, -1}}}}
	reg := fakev2.Model{Name: "reg", Versions: []string{"1"},
		Inputs:  []fakev2.Tensor{{Name: "inputs", Datatype: "BYTES", Shape: []int64{-1}}},
		Outputs: []fakev2.Tensor{{Name: "outputs", Datatype: "FP32", Shape: []int64{-1}}}}
	// tf.Example{features{feature{"x": float_list{value: [2]}}}}
	example := []byte{0x0a, 0x0f, 0x0a, 0x0d, 0x0a, 0x01, 'x', 0x12, 0x08, 0x12, 0x06, 0x0a, 0x04, 0, 0, 0, 0x40}
	request := func(model string) []byte {
		b := tfSpec(nil, tfgrpc.ModelSpec{Name: model})
		var list []byte
		list = protowire.AppendBytes(protowire.AppendTag(list, 1, protowire.BytesType), example)
		input := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), list)
		return protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), input)
	}
	spec := tfgrpc.ModelSpec{Name: "clf", Version: 1, HasVersion: true, SignatureName: "serving_default"}
	classes := tensor.Tensor{Name: "classes", DataType: tensor.Bytes, Shape: []int64{1, 2}, Strings: [][]byte{[]byte("neg"), []byte("pos")}}
	scores := tensor.Tensor{Name: "scores", DataType: tensor.FP32, Shape: []int64{1, 2}, Data: f32le(0.25, 0.75)}
	outputs := tensor.Tensor{Name: "outputs", DataType: tensor.FP32, Shape: []int64{1}, Data: f32le(3)}
	regSpec := spec
	regSpec.Name = "reg"
	for _, tt := range []struct {
		name, path, model string
		v2                []tensor.Tensor
		want              []byte
	}{
		{"classify", "/tensorflow.serving.PredictionService/Classify", "clf", []tensor.Tensor{classes, scores},
			tfgrpc.AppendClassificationResponse(nil, &classes, &scores, 1, 2, spec)},
		{"regress", "/tensorflow.serving.PredictionService/Regress", "reg", []tensor.Tensor{outputs},
			tfgrpc.AppendRegressionResponse(nil, &outputs, 1, regSpec)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "triton", clf, reg)
			ctx := context.Background()
			s, a := grpcRequestAction(t, e, grpcHeaders(tt.path), grpcFrame(request(tt.model)))
			if a.Verdict != Continue {
				t.Fatalf("request: %v %+v", a.Verdict, a.Set)
			}
			req, err := oipgrpc.DecodeInferRequest(a.Body[5:], tensor.Limits{})
			if err != nil || req.ModelName != tt.model || len(req.Tensors) != 1 || req.Tensors[0].Name != "inputs" ||
				req.Tensors[0].DataType != tensor.Bytes || len(req.Tensors[0].Strings) != 1 || !bytes.Equal(req.Tensors[0].Strings[0], example) {
				t.Fatalf("v2 request %+v %v", req, err)
			}
			s.ResponseHeaders(ctx, 200, hdr{"content-type": "application/grpc"}, false)
			v2 := oipgrpc.AppendInferResponse(nil, oipgrpc.Head{ModelName: tt.model, ModelVersion: "1"}, tt.v2)
			a = s.ResponseChunk(ctx, grpcFrame(v2), false, Whole)
			if a.Verdict != Continue || !bytes.Equal(a.Body, grpcFrame(tt.want)) {
				t.Errorf("answer %v % x\nwant % x", a.Verdict, a.Body, grpcFrame(tt.want))
			}
		})
	}
}
