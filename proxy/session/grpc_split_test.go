package session

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/url"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/internal/fakev2"
	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// grpcSplitMap splits hpt between a TF Serving server with a gRPC port
// and a v2 one (the heaviest by name on the tie: remote); legacy lives on
// a TF Serving server without one.
const grpcSplitMap = `
servers:
  tfs:    {url: "http://tf-serving.invalid:8501", kind: tfserving, grpc: "tf-serving.invalid:8500"}
  old:    {url: "http://tf-old.invalid:8501", kind: tfserving}
  remote: {url: "http://remote.invalid:8000", kind: triton, grpc: "remote.invalid:8001"}
models:
  hpt:
    split: {tfs: 50, remote: 50}
    split_key: x-user-id
    model: half_plus_two
  legacy:
    server: old
`

// grpcSplitEnv is env with grpcSplitMap: remote is a fake v2 server, the
// TF Serving servers are never reached (forwarded calls are the
// adapters' to send).
func grpcSplitEnv(t *testing.T) (*env, *modelmap.Map) {
	t.Helper()
	e := newEnv(t, "triton", halfPlusTwo)
	m, err := modelmap.Parse([]byte(grpcSplitMap))
	if err != nil {
		t.Fatal(err)
	}
	remote := fakev2.New(t, "triton", halfPlusTwo)
	rbe, err := backend.New(backend.Config{BaseURL: remote.URL, Kind: "triton", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ru, _ := url.Parse(remote.URL)
	tu, _ := url.Parse("http://tf-serving.invalid:8501")
	ou, _ := url.Parse("http://tf-old.invalid:8501")
	mp := &Mapping{Map: m, Backends: map[string]Backend{"remote": rbe, "tfs": e.be, "old": e.be},
		URLs: map[string]*url.URL{"remote": ru, "tfs": tu, "old": ou}}
	e.cfg.Mapping = func() *Mapping { return mp }
	return e, m
}

// TestGRPCSplit: a gRPC call for a split model goes to the picked
// server, sticky on the split_key metadata: to the v2 share translated,
// to the TF Serving share unchanged (bytes, :path, grpc-encoding), with
// the picked server's address and x-tfsbridge-server either way.
func TestGRPCSplit(t *testing.T) {
	e, m := grpcSplitEnv(t)
	toTFS, toV2 := keyFor(t, m, "hpt", "tfs"), keyFor(t, m, "hpt", "remote")
	spec := tfgrpc.ModelSpec{Name: "hpt"}
	plain := grpcFrame(predictMsg(spec, "x", f32Content))
	gz := gzipped(t, predictMsg(spec, "x", f32Content))
	compressed := append([]byte{1, 0, 0, 0, 0}, gz...)
	binary.BigEndian.PutUint32(compressed[1:5], uint32(len(gz)))
	for _, tc := range []struct {
		name     string
		h        hdr
		body     []byte
		chunk    int    // 0: buffered (Whole), else streamed in chunks of this size
		server   string // x-tfsbridge-server and the picked server
		upstream string
	}{
		{"key to tfserving: buffered", grpcHeaders(predictPath, "x-user-id", toTFS), plain, 0, "tfs", "tf-serving.invalid:8500"},
		{"key to tfserving: streamed", grpcHeaders(predictPath, "x-user-id", toTFS), plain, 7, "tfs", "tf-serving.invalid:8500"},
		{"key to tfserving: compressed, unchanged", grpcHeaders(predictPath, "x-user-id", toTFS, "grpc-encoding", "gzip"), compressed, 5, "tfs", "tf-serving.invalid:8500"},
		{"key to tfserving: a client's server header goes", grpcHeaders(predictPath, "x-user-id", toTFS, "x-tfsbridge-server", "remote"), plain, 0, "tfs", "tf-serving.invalid:8500"},
		{"key to v2: translated", grpcHeaders(predictPath, "x-user-id", toV2), plain, 0, "remote", "remote.invalid:8001"},
		{"key to v2: streamed", grpcHeaders(predictPath, "x-user-id", toV2), plain, 11, "remote", "remote.invalid:8001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The same key, several calls: always the same server.
			for range 5 {
				s := New(e.cfg)
				a := s.RequestHeaders(context.Background(), "POST", predictPath, tc.h, false)
				if a.Verdict != Continue {
					t.Fatalf("headers: %v", a.Verdict)
				}
				if tc.chunk == 0 {
					a = s.bufferedRequest(context.Background(), tc.body)
				} else {
					a = streamRequest(t, s, tc.body, tc.chunk)
				}
				if a.Verdict != Continue {
					checkGRPCStatus(t, a, "0", "")
				}
				if srv, _ := a.Get(HeaderServer); srv != tc.server || !a.ClearRouteCache || s.ServerName() != tc.server || s.UpstreamGRPC() != tc.upstream {
					t.Fatalf("server header %q clear %v name %s upstream %q; want %s %s", srv, a.ClearRouteCache, s.ServerName(), s.UpstreamGRPC(), tc.server, tc.upstream)
				}
				if tc.server == "tfs" {
					checkForwarded(t, s, a, tc.h, tc.body, tc.chunk != 0)
				} else {
					checkTranslated(t, s, a)
				}
				s.Close()
			}
		})
	}
	// Each call counted once in its share; the forwarded ones are not
	// tfsbridge's answers (the translated ones, never answered here, end
	// abandoned).
	if got := e.metrics.Value("tfsbridge_split_requests_total", "model", "hpt", "server", "tfs"); got != 20 {
		t.Errorf("split_requests_total{hpt,tfs} = %v, want 20", got)
	}
	if got := e.metrics.Value("tfsbridge_split_requests_total", "model", "hpt", "server", "remote"); got != 10 {
		t.Errorf("split_requests_total{hpt,remote} = %v, want 10", got)
	}
	if got := e.metrics.Value("tfsbridge_requests_total"); got != 10 {
		t.Errorf("requests_total = %v, want 10 (the translated calls only)", got)
	}
}

// checkForwarded asserts a call passed on unchanged: the body as the
// client sent it (streamed: re-sent whole; buffered: left in place), no
// :path or grpc-encoding change, the client's grpc-accept-encoding back,
// and the answer's events untouched.
func checkForwarded(t *testing.T, s *Session, a Action, h hdr, body []byte, streamed bool) {
	t.Helper()
	if !s.GRPCForward() || s.AwaitingBody() {
		t.Fatalf("GRPCForward %v, awaiting body %v", s.GRPCForward(), s.AwaitingBody())
	}
	if streamed != a.ReplaceBody || (streamed && !bytes.Equal(a.Body, body)) {
		t.Fatalf("body replaced %v: % x, want the client's % x", a.ReplaceBody, a.Body, body)
	}
	if _, ok := a.Get(hdrPath); ok {
		t.Error(":path changed")
	}
	if v, _ := a.Get(hdrGRPCAcceptEncoding); v != h["grpc-accept-encoding"] {
		t.Errorf("grpc-accept-encoding = %q, want the client's %q", v, h["grpc-accept-encoding"])
	}
	for _, k := range a.Remove {
		if k == hdrGRPCEncoding || k == hdrContentLength {
			t.Errorf("removes %s", k)
		}
	}
	ctx := context.Background()
	if r := s.ResponseHeaders(ctx, 200, hdr{"content-type": "application/grpc"}, false); r.Verdict != PassThrough {
		t.Errorf("response headers: %v", r.Verdict)
	}
	if r := s.ResponseChunk(ctx, []byte{0, 0, 0, 0, 1, 7}, false, Whole); r.Verdict != PassThrough {
		t.Errorf("response body: %v", r.Verdict)
	}
	if r := s.ResponseTrailers(ctx, hdr{"grpc-status": "3", "grpc-message": "TF's own"}); r.Verdict != Continue || len(r.Set) != 0 || len(r.Remove) != 0 {
		t.Errorf("response trailers: %+v", r)
	}
}

// checkTranslated asserts a call translated for the v2 share.
func checkTranslated(t *testing.T, s *Session, a Action) {
	t.Helper()
	if s.GRPCForward() || !a.ReplaceBody {
		t.Fatalf("GRPCForward %v, body replaced %v", s.GRPCForward(), a.ReplaceBody)
	}
	if p, _ := a.Get(hdrPath); p != "/inference.GRPCInferenceService/ModelInfer" {
		t.Errorf(":path = %q", p)
	}
	req, err := oipgrpc.DecodeInferRequest(a.Body[5:], tensor.Limits{})
	if err != nil || req.ModelName != "half_plus_two" {
		t.Fatalf("v2 request %+v %v", req, err)
	}
}

// TestGRPCForwardRefusals: a model on a TF Serving server without a gRPC
// address is UNAVAILABLE, counted as tfsbridge's answer.
func TestGRPCForwardRefusals(t *testing.T) {
	e, _ := grpcSplitEnv(t)
	s, a := grpcRequestAction(t, e, grpcHeaders(predictPath), grpcFrame(predictMsg(tfgrpc.ModelSpec{Name: "legacy"}, "x", f32Content)))
	checkGRPCStatus(t, a, "14", `The model map's server "old" is a TF Serving server without a grpc address (TF Serving's gRPC port, 8500): tfsbridge cannot pass gRPC calls to it`)
	if !s.Answered() || s.GRPCForward() {
		t.Errorf("answered %v, forwarded %v", s.Answered(), s.GRPCForward())
	}
	if got := verbCount(t, e, "grpc_predict", "503"); got != 1 {
		t.Errorf("requests_total{grpc_predict,503} = %v", got)
	}
}

// TestGRPCSplitKeysKept: only the map's split_key headers are kept from
// the request headers, and the map is the one in force then.
func TestGRPCSplitKeysKept(t *testing.T) {
	e, m := grpcSplitEnv(t)
	toTFS := keyFor(t, m, "hpt", "tfs")
	s := New(e.cfg)
	defer s.Close()
	s.RequestHeaders(context.Background(), "POST", predictPath, grpcHeaders(predictPath, "x-user-id", toTFS, "x-other", "v"), false)
	if g := s.grpc; len(g.keys) != 1 || g.keys[0] != (Header{"x-user-id", toTFS}) {
		t.Fatalf("kept %+v", g.keys)
	}
	// A reload between the headers and the body does not move the call.
	e.cfg.Mapping = func() *Mapping { return nil }
	a := s.bufferedRequest(context.Background(), grpcFrame(predictMsg(tfgrpc.ModelSpec{Name: "hpt"}, "x", f32Content)))
	if srv, _ := a.Get(HeaderServer); a.Verdict != Continue || srv != "tfs" || !s.GRPCForward() {
		t.Errorf("after a reload: %v server %q forwarded %v", a.Verdict, srv, s.GRPCForward())
	}
}
