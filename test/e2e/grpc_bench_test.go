package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	"github.com/tfsbridge/tfsbridge/test/envoysim"
	"github.com/tfsbridge/tfsbridge/test/internal/tfclient"
	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// BenchmarkGRPCHop compares, in the same run, a TF Predict call through
// tfsbridge's ext_proc hop with the v2 ModelInfer call it becomes sent
// through the same Envoy stand-in (gRPC mode: bodies BUFFERED, response
// trailers SEND) before the no-op processor, both to the mock's gRPC
// port. Calls alternate, one of each per iteration; "ratio" is
// tfsbridge's total time over the no-op's (the bound is 1.3).
func BenchmarkGRPCHop(b *testing.B) {
	st := newGRPCStack(b, triton)
	tfs := grpcBenchClient(b, st.extproc, st.mockGRPC)
	noop := grpcBenchClient(b, startNoopGRPC(b), st.mockGRPC)

	image := make([]float32, imageElements)
	for i := range image {
		image[i], _ = imageValue(i)
	}
	for _, p := range []struct {
		name, model, input string
		shape              []int64
		x                  []float32
	}{
		{"small", "half_plus_two", "x", []int64{3}, []float32{1, 2, 5}},
		{"image", "image_classifier", "image", []int64{1, 224, 224, 3}, image},
	} {
		b.Run(p.name, func(b *testing.B) {
			tp := tfclient.Float32(p.shape, p.x...)
			tfReq := tfclient.PredictRequest(tfclient.Spec(p.model), map[string]tfclient.TensorProto{p.input: tp})
			v2Req := oipgrpc.AppendInferRequestTensors(nil, oipgrpc.Head{ModelName: p.model},
				[]tensor.Tensor{{Name: p.input, DataType: tensor.FP32, Shape: p.shape, Data: tp.TensorContent}}, nil)
			ctx := context.Background()
			var tTFS, tNoop time.Duration
			b.SetBytes(int64(len(tfReq)))
			for b.Loop() {
				t0 := time.Now()
				if _, err := tfs.Call(ctx, tfclient.MethodPredict, tfReq); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := noop.Call(ctx, "/inference.GRPCInferenceService/ModelInfer", v2Req); err != nil {
					b.Fatal(err)
				}
				tTFS += t1.Sub(t0)
				tNoop += time.Since(t1)
			}
			b.ReportMetric(float64(tTFS)/float64(b.N), "tfsbridge-ns/call")
			b.ReportMetric(float64(tNoop)/float64(b.N), "noop-ns/call")
			b.ReportMetric(float64(tTFS)/float64(tNoop), "ratio")
		})
	}
}

// grpcBenchClient puts an envoysim in gRPC mode before the ext_proc
// server at proc, routing to the v2 gRPC server at upstream, and dials it.
func grpcBenchClient(b *testing.B, proc, upstream string) *tfclient.Client {
	env, err := envoysim.Start(envoysim.Config{ProcessorAddr: proc, Upstream: "http://" + upstream, UpstreamHTTP2: true,
		Mode: envoysim.GRPCMode(), AllowModeOverride: true, MessageTimeout: messageTimeout, BufferLimit: defaultBufferLimit})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Close() })
	c, err := tfclient.Dial(strings.TrimPrefix(env.URL(), "http://"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// startNoopGRPC serves the no-op processor and returns its address.
func startNoopGRPC(b *testing.B) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, noopProcessor{})
	go func() { _ = gs.Serve(lis) }()
	b.Cleanup(gs.Stop)
	return lis.Addr().String()
}
