package httpproxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/internal/grpctest"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// rawCodec passes messages as the bytes they are: the tests speak TF's
// and v2's wire formats themselves, through real gRPC clients and servers.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// v2GRPC is a small v2 GRPCInferenceService on a real gRPC server:
// half_plus_two (y = x/2 + 2), metadata, readiness, and NOT_FOUND for any
// other model. It records the metadata of the last call.
type v2GRPC struct {
	addr string
	mu   sync.Mutex
	md   metadata.MD
	dl   bool      // the last call had a deadline
	dlAt time.Time // and that deadline
}

func startV2GRPC(t *testing.T) *v2GRPC {
	t.Helper()
	v := &v2GRPC{}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(v.handle))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	v.addr = lis.Addr().String()
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return v
}

func (v *v2GRPC) handle(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	md, _ := metadata.FromIncomingContext(ss.Context())
	dlAt, dl := ss.Context().Deadline()
	v.mu.Lock()
	v.md, v.dl, v.dlAt = md, dl, dlAt
	v.mu.Unlock()
	var in []byte
	if err := ss.RecvMsg(&in); err != nil {
		return err
	}
	var out []byte
	switch method {
	case "/inference.GRPCInferenceService/ModelInfer":
		req, err := oipgrpc.DecodeInferRequest(in, tensor.Limits{})
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if req.ModelName != "half_plus_two" {
			return status.Errorf(codes.NotFound, "Request for unknown model: '%s' is not found", req.ModelName)
		}
		x := req.Tensors[0]
		y := make([]float32, len(x.Data)/4)
		for i := range y {
			y[i] = float32FromLE(x.Data[4*i:])/2 + 2
		}
		out = oipgrpc.AppendInferResponse(nil, oipgrpc.Head{ModelName: "half_plus_two", ModelVersion: "1"},
			[]tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: x.Shape, Data: f32le(y...)}})
	case "/inference.GRPCInferenceService/ModelReady":
		out = oipgrpc.AppendModelReady(nil, true)
	default:
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	return ss.SendMsg(&out)
}

func float32FromLE(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

// grpcSetup is the TF gRPC listener on a real socket in front of the v2
// stand-in (gRPC) and the mock (REST metadata), and a TF client.
func grpcSetup(t *testing.T) (*grpc.ClientConn, *v2GRPC) {
	t.Helper()
	cc, v2, _ := grpcSetupWith(t, nil)
	return cc, v2
}

// grpcSetupWith is grpcSetup with the listener's configuration changed
// by edit (when not nil); it also returns the listener's address.
func grpcSetupWith(t *testing.T, edit func(*GRPCConfig)) (*grpc.ClientConn, *v2GRPC, string) {
	t.Helper()
	v2 := startV2GRPC(t)
	mock, err := mockv2.New(mockv2.Options{Kind: "triton"})
	if err != nil {
		t.Fatal(err)
	}
	rest := httptest.NewServer(mock)
	t.Cleanup(rest.Close)
	be, err := backend.New(backend.Config{BaseURL: rest.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := GRPCConfig{Session: &session.Config{Backend: be}, Upstream: v2.addr}
	if edit != nil {
		edit(&cfg)
	}
	p, err := NewGRPC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := p.NewServer(nil)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc, v2, lis.Addr().String()
}

// TestGRPCProxy calls the listener as tensorflow-serving-api does, over
// real sockets both ways.
func TestGRPCProxy(t *testing.T) {
	cc, v2 := grpcSetup(t)
	// A generous deadline: the machine may be busy; the test waits on the
	// call, not on a timer.
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-team", "vision"), 30*time.Second)
	defer cancel()
	in := grpctest.Predict(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", grpctest.F32Content)
	var out []byte
	if err := cc.Invoke(ctx, grpctest.PredictPath, &in, &out); err != nil {
		t.Fatalf("Predict: %v", err)
	}
	want := tfgrpc.AppendPredictResponse(nil, []tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{2}, Data: f32le(2.5, 3)}},
		tfgrpc.ModelSpec{Name: "half_plus_two", Version: 1, HasVersion: true, SignatureName: "serving_default"}, tfgrpc.TypedFields)
	if !bytes.Equal(out, want) {
		t.Errorf("PredictResponse % x\nwant % x", out, want)
	}
	v2.mu.Lock()
	md, dl := v2.md, v2.dl
	v2.mu.Unlock()
	if got := md.Get("x-team"); len(got) != 1 || got[0] != "vision" || !dl {
		t.Errorf("v2 call metadata %v, deadline %v: want x-team and a deadline forwarded", md, dl)
	}

	tests := []struct {
		name string
		path string
		in   []byte
		code codes.Code
		msg  string
	}{
		{"unknown model (refused before the call)", grpctest.PredictPath, grpctest.Predict(tfgrpc.ModelSpec{Name: "nope"}, "x", grpctest.F32Content),
			codes.NotFound, "Servable not found for request: Latest(nope)"},
		{"wrong alias", grpctest.PredictPath, grpctest.Predict(tfgrpc.ModelSpec{Name: "half_plus_two"}, "images", grpctest.F32Content),
			codes.InvalidArgument, "Signature input alias: x(feed name: x:0) not found in request and no default value provided. Inputs expected to be in the request {images}, or default input alias set: "},
		{"multi inference", "/tensorflow.serving.PredictionService/MultiInference", nil,
			codes.Unimplemented, "MultiInference is not supported: tfsbridge translates to a v2 inference server, which has no equivalent"},
		{"not a TF service", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", nil, codes.Unimplemented,
			"unknown service or method /grpc.reflection.v1.ServerReflection/ServerReflectionInfo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out []byte
			err := cc.Invoke(ctx, tt.path, &tt.in, &out)
			if st, _ := status.FromError(err); st.Code() != tt.code || st.Message() != tt.msg {
				t.Errorf("status %v %q, want %v %q", st.Code(), st.Message(), tt.code, tt.msg)
			}
		})
	}

	t.Run("status of a version", func(t *testing.T) {
		in := grpctest.Spec(nil, tfgrpc.ModelSpec{Name: "half_plus_two", Version: 1, HasVersion: true})
		var out []byte
		if err := cc.Invoke(ctx, "/tensorflow.serving.ModelService/GetModelStatus", &in, &out); err != nil {
			t.Fatal(err)
		}
		want := tfgrpc.AppendStatusResponse(nil, []tfgrpc.VersionStatus{{Version: 1, State: tfgrpc.StateAvailable}})
		if !bytes.Equal(out, want) {
			t.Errorf("status % x, want % x", out, want)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		// A deadline already past: gRPC's own answer, never a hang.
		dctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
		defer cancel()
		var out []byte
		err := cc.Invoke(dctx, grpctest.PredictPath, &in, &out)
		if st, _ := status.FromError(err); st.Code() != codes.DeadlineExceeded {
			t.Errorf("status %v, want DEADLINE_EXCEEDED", err)
		}
	})
}

// TestGRPCProxyBackendError: the v2 server's status in its trailers-only
// answer becomes TF's.
func TestGRPCProxyBackendError(t *testing.T) {
	cc, _ := grpcSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// GetModelMetadata calls v2 ModelMetadata, which the stand-in does not
	// implement: UNIMPLEMENTED with its text goes through.
	in := grpctest.Metadata(tfgrpc.ModelSpec{Name: "half_plus_two"})
	var out []byte
	err := cc.Invoke(ctx, "/tensorflow.serving.PredictionService/GetModelMetadata", &in, &out)
	st, _ := status.FromError(err)
	if st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), "ModelMetadata") {
		t.Errorf("status %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Error("the call hung")
	}
}

func TestGRPCTimeoutHeader(t *testing.T) {
	for _, tt := range []struct {
		v  string
		d  time.Duration
		ok bool
	}{{"10S", 10 * time.Second, true}, {"250m", 250 * time.Millisecond, true}, {"1H", time.Hour, true},
		{"123456789S", 0, false}, {"S", 0, false}, {"10x", 0, false}, {"-1S", 0, false}} {
		d, ok := parseGRPCTimeout(tt.v)
		if d != tt.d || ok != tt.ok {
			t.Errorf("parse %q = %v %v", tt.v, d, ok)
		}
		if ok {
			if back, _ := parseGRPCTimeout(formatGRPCTimeout(d)); back != d {
				t.Errorf("format %v round-trips to %v", d, back)
			}
		}
	}
}

// TestGRPCDeadlineForwarded: the v2 call's deadline is the client's (the
// time left, as gRPC forwards it), or --request-timeout when the client
// names none.
func TestGRPCDeadlineForwarded(t *testing.T) {
	const requestTimeout = 7 * time.Minute
	cc, v2, _ := grpcSetupWith(t, func(c *GRPCConfig) { c.RequestTimeout = requestTimeout })
	in := grpctest.Predict(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", grpctest.F32Content)
	// The client deadlines are far apart and far from requestTimeout, so
	// that a busy machine's delays cannot blur which one the v2 call got.
	for _, tt := range []struct {
		name     string
		deadline time.Duration // 0: none
		min, max time.Duration // of the v2 call's deadline, from before the call
	}{
		{"client's deadline", 40 * time.Second, 10 * time.Second, 40 * time.Second},
		{"no deadline: --request-timeout", 0, 5 * time.Minute, requestTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			start := time.Now()
			var out []byte
			if err := cc.Invoke(ctx, grpctest.PredictPath, &in, &out); err != nil {
				t.Fatalf("Predict: %v", err)
			}
			v2.mu.Lock()
			dl, at := v2.dl, v2.dlAt
			v2.mu.Unlock()
			// The v2 server counts the time left from when it got the
			// call, up to the call's duration after start.
			upper := tt.max + time.Since(start)
			if got := at.Sub(start); !dl || got < tt.min || got > upper {
				t.Errorf("v2 call deadline %v after the call began (set %v), want within [%v, %v]", got, dl, tt.min, upper)
			}
		})
	}
}

// TestGRPCMessageCap: a message over the body limit (--max-body-bytes;
// TF Serving's own is 2 GiB) is RESOURCE_EXHAUSTED, as a gRPC server
// answers a message over its cap, and never reaches the v2 server; one
// within it passes.
func TestGRPCMessageCap(t *testing.T) {
	const limit = 4096
	cc, v2, _ := grpcSetupWith(t, func(c *GRPCConfig) { c.Session.MaxBodyBytes = limit })
	// A bound for a hang on a busy machine, not a timing assumption.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tensorOf := func(n int) []byte {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i)
		}
		// TensorProto{dtype: DT_FLOAT, tensor_shape{dim{size: n}}, tensor_content}
		dim := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(n))
		shape := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), dim)
		tp := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1)
		tp = protowire.AppendBytes(protowire.AppendTag(tp, 2, protowire.BytesType), shape)
		return protowire.AppendBytes(protowire.AppendTag(tp, 4, protowire.BytesType), f32le(x...))
	}
	for _, tt := range []struct {
		name string
		n    int
		code codes.Code
	}{
		{"within the limit", 256, codes.OK},
		{"over the limit", 2048, codes.ResourceExhausted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v2.mu.Lock()
			v2.md = nil
			v2.mu.Unlock()
			in := grpctest.Predict(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", tensorOf(tt.n))
			var out []byte
			err := cc.Invoke(ctx, grpctest.PredictPath, &in, &out)
			if status.Code(err) != tt.code {
				t.Fatalf("status %v, want %v", err, tt.code)
			}
			v2.mu.Lock()
			called := v2.md != nil
			v2.mu.Unlock()
			if called != (tt.code == codes.OK) {
				t.Errorf("v2 server called: %v", called)
			}
		})
	}
}
