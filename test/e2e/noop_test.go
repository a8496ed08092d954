package e2e

import (
	"errors"
	"io"
	"net"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/tfsbridge/tfsbridge/proxy/extproc"
	"github.com/tfsbridge/tfsbridge/test/envoysim"
)

// noopProcessor is the cheapest ext_proc server there is: it answers
// every message with an empty reply of the matching type (CONTINUE, no
// mutation), and in full-duplex mode echoes each body chunk unchanged as
// its streamed_response (the least that mode allows). It is
// BenchmarkPath's floor for what an ext_proc hop costs.
type noopProcessor struct {
	extprocv3.UnimplementedExternalProcessorServer
}

// Process answers each message at once.
func (noopProcessor) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	duplex := false
	for first := true; ; first = false {
		req, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		if first {
			pc := req.GetProtocolConfig()
			duplex = pc.GetRequestBodyMode() == extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
		}
		resp := &extprocv3.ProcessingResponse{}
		switch m := req.GetRequest().(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			resp.Response = &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}
		case *extprocv3.ProcessingRequest_RequestBody:
			resp.Response = &extprocv3.ProcessingResponse_RequestBody{RequestBody: echo(duplex, m.RequestBody)}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			resp.Response = &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}
		case *extprocv3.ProcessingRequest_ResponseBody:
			resp.Response = &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: echo(duplex, m.ResponseBody)}
		case *extprocv3.ProcessingRequest_RequestTrailers:
			resp.Response = &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}
		case *extprocv3.ProcessingRequest_ResponseTrailers:
			resp.Response = &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// echo is the no-op body reply: empty when buffered, the chunk itself as
// streamed_response in full duplex.
func echo(duplex bool, b *extprocv3.HttpBody) *extprocv3.BodyResponse {
	if !duplex {
		return &extprocv3.BodyResponse{}
	}
	return &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
		Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{
			Body: b.GetBody(), EndOfStream: b.GetEndOfStream()}}}}}
}

// startNoop serves a noopProcessor on loopback and puts an envoysim in
// front of it configured as the stack's (all four messages, bodies
// BUFFERED) with the same upstream: a v2 client's pre-encoded request
// through it gets the same answer as through the direct envoysim, after
// the same four ext_proc round trips tfsbridge's exchange costs.
func startNoop(tb testing.TB, s *stack) *envoysim.Envoy {
	return startNoopMode(tb, s, false)
}

// startNoopMode is startNoop, in full-duplex mode when duplex is set (as
// the stack's full-duplex envoysim is configured).
func startNoopMode(tb testing.TB, s *stack, duplex bool) *envoysim.Envoy {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	// The transport settings tfsbridge's server runs with: the hop's
	// floor is what any processor tuned that way pays.
	gs := grpc.NewServer(extproc.TransportOptions()...)
	extprocv3.RegisterExternalProcessorServer(gs, noopProcessor{})
	go func() { _ = gs.Serve(lis) }()
	tb.Cleanup(gs.Stop)
	cfg := envoysim.Config{
		ProcessorAddr:     lis.Addr().String(),
		Upstream:          s.v2URL,
		Mode:              envoysim.DefaultMode(),
		AllowModeOverride: true,
		MessageTimeout:    messageTimeout,
		BufferLimit:       defaultBufferLimit,
	}
	if duplex {
		cfg = envoysim.Config{ProcessorAddr: lis.Addr().String(), Upstream: s.v2URL, Mode: envoysim.FullDuplexMode()}
	}
	env, err := envoysim.Start(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if v := env.Violations(); len(v) > 0 {
			tb.Errorf("envoysim (no-op) violations: %q", v)
		}
		_ = env.Close()
	})
	return env
}
