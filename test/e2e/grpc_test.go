package e2e

import (
	"context"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/test/envoysim"
	"github.com/tfsbridge/tfsbridge/test/internal/tfclient"
)

// grpcStack is the gRPC deployment: the mock serving v2 over REST (the
// metadata tfsbridge reads) and gRPC, the bridge with its ext_proc server
// and its TF gRPC listener, and the Envoy stand-in in front of the
// ext_proc server in both body modes, routing to the mock's gRPC port.
type grpcStack struct {
	bridge  *bridge.Bridge
	clients map[string]*tfclient.Client // by transport
	// extproc and mockGRPC are the ext_proc server's and the mock's v2
	// gRPC addresses.
	extproc, mockGRPC string
}

// grpcTransports are the ways a TF gRPC client reaches tfsbridge.
var grpcTransports = []string{viaExtproc, viaExtprocFD, "proxy-grpc"}

// grpcStackOptions add to a grpcStack: a model map and the Envoy routes
// of its servers.
type grpcStackOptions struct {
	ModelMap string // --model-map document, "" for none
	Routes   []envoysim.HeaderRoute
	// Edit, when set, changes the bridge's options.
	Edit func(*bridge.Options)
}

func newGRPCStack(t testing.TB, kind string) *grpcStack {
	t.Helper()
	return newGRPCStackWith(t, kind, grpcStackOptions{})
}

// startMockV2 serves a v2 mock over REST and gRPC until the test ends and
// returns the REST base URL and the gRPC address.
func startMockV2(t testing.TB, o mockv2.Options) (restURL, grpcAddr string) {
	t.Helper()
	mock, err := mockv2.New(o)
	if err != nil {
		t.Fatal(err)
	}
	rest := httptest.NewServer(mock)
	t.Cleanup(rest.Close)
	glis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := mock.NewGRPCServer()
	go func() { _ = gs.Serve(glis) }()
	t.Cleanup(gs.Stop)
	return rest.URL, glis.Addr().String()
}

func newGRPCStackWith(t testing.TB, kind string, opt grpcStackOptions) *grpcStack {
	t.Helper()
	restURL, grpcAddr := startMockV2(t, mockv2.Options{Kind: kind})

	o := bridge.DefaultOptions()
	o.BackendURL, o.BackendKind, o.TFGRPCBackend, o.DrainDelay = restURL, kind, grpcAddr, 0
	if opt.ModelMap != "" {
		o.ModelMapFile = filepath.Join(t.TempDir(), "models.yaml")
		if err := os.WriteFile(o.ModelMapFile, []byte(opt.ModelMap), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if opt.Edit != nil {
		opt.Edit(&o)
	}
	b, err := bridge.New(o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := bridge.Listen(bridge.Addrs{Extproc: "127.0.0.1:0", TFGRPC: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	st := &grpcStack{bridge: b, clients: map[string]*tfclient.Client{}, extproc: l.Extproc.Addr().String(), mockGRPC: grpcAddr}
	dial := func(name, addr string) {
		c, err := tfclient.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		st.clients[name] = c
	}
	// BUFFERED with the REST deployment's filter configuration (the
	// processor turns the trailers on with mode_override), and
	// FULL_DUPLEX_STREAMED.
	for name, mode := range map[string]func() *extprocfilterv3.ProcessingMode{viaExtproc: envoysim.DefaultMode, viaExtprocFD: envoysim.FullDuplexMode} {
		env, err := envoysim.Start(envoysim.Config{ProcessorAddr: l.Extproc.Addr().String(), Upstream: "http://" + grpcAddr,
			UpstreamHTTP2: true, Mode: mode(), AllowModeOverride: true, MessageTimeout: messageTimeout, BufferLimit: defaultBufferLimit,
			HeaderRoutes: opt.Routes})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, v := range env.Violations() {
				t.Errorf("envoysim (%s) violation: %s", name, v)
			}
			env.Close()
		})
		dial(name, strings.TrimPrefix(env.URL(), "http://"))
	}
	dial("proxy-grpc", l.TFGRPC.Addr().String())
	return st
}

// TestGRPCClients calls every TF Serving gRPC method as
// tensorflow-serving-api does, through every transport, against the mock
// in each server's habits, and decodes the answers with TF Serving's
// message layout (tfclient, a reading of the protos independent of
// tfsbridge's).
func TestGRPCClients(t *testing.T) {
	for _, kind := range []string{triton, kserve, mlserver} {
		t.Run(kind, func(t *testing.T) {
			st := newGRPCStack(t, kind)
			for _, via := range grpcTransports {
				t.Run(via, func(t *testing.T) { grpcCalls(t, st.clients[via], kind) })
			}
		})
	}
}

// callContext bounds a test's gRPC calls: a bound for a hang on a busy
// machine, not a timing assumption.
func callContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func grpcCalls(t *testing.T, c *tfclient.Client, kind string) {
	ctx := callContext(t)

	// make_tensor_proto(np.array([1, 2, 5], np.float32)): tensor_content.
	p, err := c.Predict(ctx, tfclient.PredictRequest(tfclient.Spec("half_plus_two"),
		map[string]tfclient.TensorProto{"x": tfclient.Float32([]int64{3}, 1, 2, 5)}))
	if err != nil {
		t.Fatalf("Predict: %v", err)
	}
	y := p.Outputs["y"]
	if y.DType != tfclient.DTFloat || !slices.Equal(y.Shape, []int64{3}) || !slices.Equal(y.FloatVal, []float32{2.5, 3, 4.5}) ||
		p.ModelSpec.Name != "half_plus_two" || p.ModelSpec.SignatureName != "serving_default" {
		t.Errorf("Predict answer %+v", p)
	}

	// A gzip-compressed message (grpc-encoding: gzip, flag 1): inflated,
	// answered uncompressed (spec §5.5).
	p, err = c.Predict(ctx, tfclient.PredictRequest(tfclient.Spec("half_plus_two"),
		map[string]tfclient.TensorProto{"x": tfclient.Float32([]int64{3}, 1, 2, 5)}), grpc.UseCompressor(gzip.Name))
	if err != nil || !slices.Equal(p.Outputs["y"].FloatVal, []float32{2.5, 3, 4.5}) {
		t.Errorf("gzip Predict: %+v %v", p, err)
	}

	// A Python scalar (float_val, shape []), broadcast by TF's rules to [3]
	// when the client pads the shape.
	p, err = c.Predict(ctx, tfclient.PredictRequest(tfclient.Spec("half_plus_two"),
		map[string]tfclient.TensorProto{"x": {DType: tfclient.DTFloat, Shape: []int64{3}, FloatVal: []float32{4}}}))
	if err != nil || !slices.Equal(p.Outputs["y"].FloatVal, []float32{4, 4, 4}) {
		t.Errorf("broadcast Predict: %+v %v", p, err)
	}

	// make_tensor_proto(3.0): spec §7's scalar, float_val and an empty
	// tensor_shape; v2 gets it as shape [1] (Triton counts [] as no
	// element).
	p, err = c.Predict(ctx, tfclient.PredictRequest(tfclient.Spec("half_plus_two"),
		map[string]tfclient.TensorProto{"x": tfclient.Float32(nil, 3)}))
	if err != nil || !slices.Equal(p.Outputs["y"].FloatVal, []float32{3.5}) {
		t.Errorf("scalar Predict: %+v %v", p, err)
	}

	// Strings: string_val both ways.
	p, err = c.Predict(ctx, tfclient.PredictRequest(tfclient.Spec("bytes_echo"),
		map[string]tfclient.TensorProto{"text": tfclient.Strings([]int64{2}, "ab", "c")}))
	if err != nil || len(p.Outputs["echo"].StringVal) != 2 || string(p.Outputs["echo"].StringVal[0]) != "ab" {
		t.Errorf("bytes Predict: %+v %v", p, err)
	}

	// output_filter → v2 outputs: only the ones asked for come back.
	p, err = c.Predict(ctx, tfclient.PredictRequest(tfclient.Spec("multi_out"),
		map[string]tfclient.TensorProto{"x": tfclient.Float32([]int64{2, 2}, 1, 2, 4, 3)}, "argmax"))
	if err != nil || len(p.Outputs) != 1 || !slices.Equal(p.Outputs["argmax"].Int64Val, []int64{1, 0}) {
		t.Errorf("output_filter Predict: %+v %v", p, err)
	}

	// Classify and Regress: serialized tf.Examples.
	cl, err := c.Classify(ctx, tfclient.ClassificationRequest(tfclient.Spec("linear_classifier"),
		tfclient.Example(map[string]tfclient.Feature{"x": {Floats: []float32{0}}}),
		tfclient.Example(map[string]tfclient.Feature{"x": {Floats: []float32{2}}})))
	if err != nil || len(cl.Classifications) != 2 || len(cl.Classifications[0]) != 2 || cl.Classifications[0][0].Label != "negative" {
		t.Errorf("Classify: %+v %v", cl, err)
	}
	rg, err := c.Regress(ctx, tfclient.RegressionRequest(tfclient.Spec("linear_regressor"),
		tfclient.Example(map[string]tfclient.Feature{"x": {Floats: []float32{2}}})))
	if err != nil || len(rg.Values) != 1 || rg.Values[0] != 3 {
		t.Errorf("Regress: %+v %v", rg, err)
	}

	md, err := c.GetModelMetadata(ctx, tfclient.GetModelMetadataRequest(tfclient.Spec("half_plus_two"), "signature_def"))
	if err != nil || md.TypeURL != tfclient.SignatureDefMapURL || md.SignatureDefs["serving_default"].Inputs["x"].Name != "x:0" {
		t.Errorf("GetModelMetadata: %+v %v", md, err)
	}
	vs, err := c.GetModelStatus(ctx, tfclient.GetModelStatusRequest(tfclient.Spec("half_plus_two").WithVersion(1)))
	if err != nil || len(vs) != 1 || vs[0].Version != 1 || vs[0].State != 30 {
		t.Errorf("GetModelStatus: %+v %v", vs, err)
	}
	// Without a version: every version v2 metadata lists (Triton's and
	// MLServer's "1"); KServe lists none, so one entry with the
	// configured default version, unset here (0, as REST's status says).
	vs, err = c.GetModelStatus(ctx, tfclient.GetModelStatusRequest(tfclient.Spec("half_plus_two")))
	wantVersion := int64(1)
	if kind == kserve {
		wantVersion = 0
	}
	if err != nil || len(vs) != 1 || vs[0].Version != wantVersion || vs[0].State != 30 || vs[0].ErrorCode != 0 {
		t.Errorf("GetModelStatus, all versions: %+v %v", vs, err)
	}

	for _, e := range []struct {
		name, method string
		req          []byte
		code         codes.Code
		msg          string
	}{
		{"unknown model", tfclient.MethodPredict, tfclient.PredictRequest(tfclient.Spec("nope"),
			map[string]tfclient.TensorProto{"x": tfclient.Float32([]int64{1}, 1)}),
			codes.NotFound, "Servable not found for request: Latest(nope)"},
		{"unknown output_filter", tfclient.MethodPredict, tfclient.PredictRequest(tfclient.Spec("multi_out"),
			map[string]tfclient.TensorProto{"x": tfclient.Float32([]int64{1, 2}, 1, 2)}, "nope"),
			codes.InvalidArgument, "output tensor alias not found in signature: nope Outputs expected to be in the set {argmax,label_bytes,sum}."},
		{"float64 for a float input", tfclient.MethodPredict, tfclient.PredictRequest(tfclient.Spec("half_plus_two"),
			map[string]tfclient.TensorProto{"x": tfclient.Float64([]int64{2}, 1, 2)}),
			codes.InvalidArgument, "Expects arg[0] to be float but double is provided"},
		{"status of an unknown model", tfclient.MethodGetModelStatus, tfclient.GetModelStatusRequest(tfclient.Spec("nope")),
			codes.NotFound, "Could not find any versions of model nope"},
		{"status of an unknown model's version", tfclient.MethodGetModelStatus, tfclient.GetModelStatusRequest(tfclient.Spec("nope").WithVersion(3)),
			codes.NotFound, "Could not find version 3 of model nope"},
		{"reload config", tfclient.MethodReloadConfig, nil,
			codes.Unimplemented, "HandleReloadConfigRequest is not supported: tfsbridge translates to a v2 inference server, which has no equivalent"},
		{"metadata without a field", tfclient.MethodGetModelMetadata, tfclient.GetModelMetadataRequest(tfclient.Spec("half_plus_two")),
			codes.InvalidArgument, "GetModelMetadataRequest must specify at least one metadata_field"},
		{"multi inference", tfclient.MethodMultiInference, tfclient.GetModelStatusRequest(tfclient.Spec("half_plus_two")),
			codes.Unimplemented, "MultiInference is not supported: tfsbridge translates to a v2 inference server, which has no equivalent"},
	} {
		_, err := c.Call(ctx, e.method, e.req)
		if st, _ := status.FromError(err); st.Code() != e.code || st.Message() != e.msg {
			t.Errorf("%s (%s): %v %q, want %v %q", e.name, kind, st.Code(), st.Message(), e.code, e.msg)
		}
	}
}

// TestGRPCDefaultVersion: --tf-grpc-default-version is the version TF
// answers carry when the v2 server names none (KServe), through every
// transport.
func TestGRPCDefaultVersion(t *testing.T) {
	st := newGRPCStackWith(t, kserve, grpcStackOptions{Edit: func(o *bridge.Options) { o.TFGRPCDefaultVersion = 4 }})
	x := map[string]tfclient.TensorProto{"x": tfclient.Float32([]int64{3}, 1, 2, 5)}
	for _, via := range grpcTransports {
		t.Run(via, func(t *testing.T) {
			c := st.clients[via]
			ctx := callContext(t)
			p, err := c.Predict(ctx, tfclient.PredictRequest(tfclient.Spec("half_plus_two"), x))
			if err != nil || p.ModelSpec.Version == nil || *p.ModelSpec.Version != 4 {
				t.Errorf("Predict: %+v %v, want model_spec.version 4", p, err)
			}
			vs, err := c.GetModelStatus(ctx, tfclient.GetModelStatusRequest(tfclient.Spec("half_plus_two")))
			if err != nil || len(vs) != 1 || vs[0].Version != 4 || vs[0].State != 30 {
				t.Errorf("GetModelStatus: %+v %v, want version 4 AVAILABLE", vs, err)
			}
			md, err := c.GetModelMetadata(ctx, tfclient.GetModelMetadataRequest(tfclient.Spec("half_plus_two"), "signature_def"))
			if err != nil || md.ModelSpec.Version == nil || *md.ModelSpec.Version != 4 {
				t.Errorf("GetModelMetadata: %+v %v, want model_spec.version 4", md, err)
			}
		})
	}
}

// TestGRPCTensorContent: --tf-grpc-tensor-content answers as TF Serving's
// --enable_serialization_as_tensor_content does, through every transport:
// every value in tensor_content (little-endian; DT_STRING as TF's string
// list, the varint lengths then the bytes), no typed field.
func TestGRPCTensorContent(t *testing.T) {
	st := newGRPCStackWith(t, triton, grpcStackOptions{Edit: func(o *bridge.Options) { o.TFGRPCTensorContent = true }})
	for _, via := range grpcTransports {
		t.Run(via, func(t *testing.T) {
			c := st.clients[via]
			ctx := callContext(t)
			p, err := c.Predict(ctx, tfclient.PredictRequest(tfclient.Spec("half_plus_two"),
				map[string]tfclient.TensorProto{"x": tfclient.Float32([]int64{3}, 1, 2, 5)}))
			want := tfclient.TensorProto{DType: tfclient.DTFloat, Shape: []int64{3},
				TensorContent: []byte{0, 0, 0x20, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x90, 0x40}} // 2.5, 3, 4.5
			if err != nil || !reflect.DeepEqual(p.Outputs["y"], want) {
				t.Errorf("Predict: %+v %v\nwant y %+v", p, err, want)
			}
			p, err = c.Predict(ctx, tfclient.PredictRequest(tfclient.Spec("bytes_echo"),
				map[string]tfclient.TensorProto{"text": tfclient.Strings([]int64{2}, "ab", "c")}))
			want = tfclient.TensorProto{DType: tfclient.DTString, Shape: []int64{2}, TensorContent: []byte{2, 1, 'a', 'b', 'c'}}
			if err != nil || !reflect.DeepEqual(p.Outputs["echo"], want) {
				t.Errorf("bytes Predict: %+v %v\nwant echo %+v", p, err, want)
			}
		})
	}
}

// TestGRPCBackendCaps is spec §6.5's RESOURCE_EXHAUSTED row with the
// real caps: a message within tfsbridge's limit but over the v2 server's
// (KServe 8 MiB, MLServer grpcio's 4 MiB; TF Serving's is 2 GiB) gets the
// server's RESOURCE_EXHAUSTED and text, through every transport (the
// stand-in's buffer limit is the 64 MiB of the deployments).
func TestGRPCBackendCaps(t *testing.T) {
	for kind, mib := range map[string]int{kserve: 9, mlserver: 5} {
		t.Run(kind, func(t *testing.T) {
			st := newGRPCStack(t, kind)
			x := make([]float32, mib<<20/4)
			req := tfclient.PredictRequest(tfclient.Spec("half_plus_two"), map[string]tfclient.TensorProto{"x": tfclient.Float32([]int64{int64(len(x))}, x...)})
			for _, via := range grpcTransports {
				t.Run(via, func(t *testing.T) {
					ctx := callContext(t)
					_, err := st.clients[via].Call(ctx, tfclient.MethodPredict, req)
					if s, _ := status.FromError(err); s.Code() != codes.ResourceExhausted || !strings.Contains(s.Message(), "larger than max") {
						t.Errorf("%v %q, want RESOURCE_EXHAUSTED with the server's text", s.Code(), s.Message())
					}
				})
			}
		})
	}
}
