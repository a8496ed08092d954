package extproc

import (
	"context"
	"math"
	"net"
	"runtime"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/tfsbridge/tfsbridge/internal/framepool"
	"github.com/tfsbridge/tfsbridge/proxy/inflight"
	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// frameMargin is the room left for a message's own framing beyond the
// body it carries.
const frameMargin = 1 << 20

// DefaultMaxRecvMsgBytes is the gRPC receive limit when none is set: in
// effect none of ours (grpc-go's ceiling). A buffered body reaches us as
// one gRPC message, and any limit below what Envoy may send — its buffer
// limit, which can exceed --max-body-bytes — turns a body the session
// would refuse with TF's 413 (or 502 for a response) into
// RESOURCE_EXHAUSTED, which Envoy answers with a bare 500 (ai-gateway
// #1209). It costs nothing until Envoy really sends that much: grpc-go
// checks the length prefix against the limit and then reads the message
// as its frames arrive, and Envoy's buffer limit bounds what it sends.
const DefaultMaxRecvMsgBytes = math.MaxInt32

// ServerOptions configures NewServer.
type ServerOptions struct {
	// MaxBodyBytes is the largest body the session accepts; the gRPC
	// message limits are derived from it.
	MaxBodyBytes int64
	// MaxRecvMsgBytes, when positive, is the gRPC receive limit instead of
	// DefaultMaxRecvMsgBytes: for an ext_proc port that peers other than
	// Envoy can reach. Envoy sends a buffered body as one message, so it
	// should be at least Envoy's buffer limit plus 1 MiB of framing, and
	// never below MaxBodyBytes: a larger body fails as a gRPC error, a
	// bare 500 from Envoy instead of a TF error.
	MaxRecvMsgBytes int64
	// GRPCOptions are appended to the server's own (TLS credentials,
	// interceptors).
	GRPCOptions []grpc.ServerOption
	// Ready, when set, is asked by every gRPC health Check: an error
	// answers NOT_SERVING, so that gRPC health agrees with /readyz.
	Ready func(context.Context) error
}

// ShutdownStats are what a graceful stop did: streams that finished
// while it waited, and streams still running when its time was up.
type ShutdownStats struct {
	Drained, Cut int
}

// Server is the gRPC server that serves the ext_proc service and
// grpc.health.v1 (for "" and for the ext_proc service name, which is what
// Envoy's gRPC health checks ask for).
type Server struct {
	// GRPC is the underlying server.
	GRPC *grpc.Server
	// Health is its health service; Shutdown flips it to NOT_SERVING.
	Health *health.Server

	proc     *Processor
	inflight *inflight.Tracker
	stats    ShutdownStats
}

// cutAnswerGrace is how long, once the shutdown timeout has cut the
// streams in progress, the ones that can still answer (full duplex, a
// headers reply withheld) get to send TF's 503 before the server stops.
const cutAnswerGrace = 2 * time.Second

// NewServer builds the gRPC server around p.
func NewServer(p *Processor, opt ServerOptions) *Server {
	maxBody := opt.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = session.DefaultMaxBodyBytes
	}
	maxRecv := int64(DefaultMaxRecvMsgBytes)
	if opt.MaxRecvMsgBytes > 0 {
		maxRecv = opt.MaxRecvMsgBytes
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(clampInt(maxRecv)),
		// BUFFERED bodies are read and sent without protobuf's copies.
		grpc.ForceServerCodecV2(newBodyCodec()),
		// A reply carries at most one translated answer, which the session
		// caps at OutputExpansion × the body limit; a lower send limit
		// would turn an answer the session accepted into a failed stream
		// (Envoy's bare 500) instead of the answer.
		grpc.MaxSendMsgSize(clampInt(maxBody*session.OutputExpansion + frameMargin)),
		// Envoy clusters often enable HTTP/2 keepalive pings; grpc-go's
		// default enforcement (one ping per 5 min) answers faster pings
		// with GOAWAY "too_many_pings", failing in-flight requests.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             5 * time.Second,
			PermitWithoutStream: true,
		}),
		// Ping idle Envoy connections so dead peers are noticed.
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    time.Minute,
			Timeout: 20 * time.Second,
		}),
		// Every HTTP request is a stream: run them on goroutines kept
		// from one stream to the next (grpc-go starts one per stream when
		// all are busy), so that a stream does not grow a fresh stack to
		// the session's depth each time (stack copies were about a tenth
		// of a small exchange's CPU in the processor).
		grpc.NumStreamWorkers(streamWorkers()),
	}
	opts = append(opts, TransportOptions()...)
	gs := grpc.NewServer(append(opts, opt.GRPCOptions...)...)
	extprocv3.RegisterExternalProcessorServer(gs, p)
	hs := health.NewServer()
	s := &Server{GRPC: gs, Health: hs, proc: p, inflight: p.Inflight()}
	s.SetServing(true)
	healthpb.RegisterHealthServer(gs, &readyHealth{Server: hs, ready: opt.Ready})
	return s
}

// Receive windows of the server's HTTP/2 connections: fixed, instead of
// grpc-go's 64 KiB grown by its BDP estimator.
const (
	// streamWindow bounds what Envoy may send on one stream ahead of the
	// session: a full-duplex body's chunks wait in the transport until the
	// session reads them, so it is memory held per stream (grpc-go widens
	// it for one whole message anyway, so a BUFFERED body never waits).
	streamWindow = 1 << 20
	// connWindow bounds the same over all the streams of one connection.
	connWindow = 16 << 20
)

// TransportOptions are the gRPC transport settings of the ext_proc server
// (NewServer adds them): what any ext_proc server could use, which is why
// BenchmarkPath's no-op processor runs with them too.
//
//   - Fixed receive windows (streamWindow, connWindow). The BDP estimator
//     behind grpc-go's dynamic windows pings the peer on every burst of
//     data it receives — several pings and acks per exchange of four
//     small messages, each a frame written and read at both ends; Envoy
//     sends none (its windows are fixed, 16 MiB a stream since 1.36).
//   - Frames read into buffers that are not cleared first (internal/framepool): a
//     BUFFERED body is read once, not cleared and then read.
func TransportOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		experimental.BufferPool(framepool.New()),
	}
}

// Serve serves on lis until ctx is done, then shuts down gracefully,
// giving in-flight streams up to drain to finish (Stats says how that
// went). It returns the serve error, or nil after a shutdown.
func (s *Server) Serve(ctx context.Context, lis net.Listener, drain time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- s.GRPC.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Shutdown(drain)
	<-errc
	return nil
}

// Shutdown reports NOT_SERVING to health checkers, stops accepting
// streams, waits up to drain for in-flight ones (each is one HTTP request,
// so they end quickly) and then cuts the rest: Envoy answers their
// requests itself (ext_proc can answer only a message Envoy sent, and a
// cut stream is almost always waiting for the v2 server's answer), but
// for full-duplex streams that withhold a headers reply (a body still
// streaming): Envoy awaits a reply there, so they answer TF's 503 first
// (cutAnswerGrace).
func (s *Server) Shutdown(drain time.Duration) {
	s.Health.Shutdown()
	s.inflight.Drain()
	done := make(chan struct{})
	go func() {
		s.GRPC.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(drain)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		answering := s.proc.holding.Load() > 0
		s.stats.Cut = s.inflight.Cut()
		if answering {
			a := time.NewTimer(cutAnswerGrace)
			select {
			case <-done:
			case <-a.C:
			}
			a.Stop()
		}
		s.GRPC.Stop()
		<-done
	}
	s.stats.Drained = s.inflight.Drained()
}

// Stats returns what the last Shutdown did; call it after Serve or
// Shutdown returned.
func (s *Server) Stats() ShutdownStats { return s.stats }

// streamWorkers is the number of goroutines kept for streams: a stream
// mostly waits (for Envoy, for the v2 server), so a few per core.
func streamWorkers() uint32 {
	return uint32(4 * runtime.GOMAXPROCS(0))
}

func clampInt(n int64) int {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(n)
}
