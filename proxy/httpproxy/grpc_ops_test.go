package httpproxy

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tfsbridge/tfsbridge/proxy/internal/grpctest"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// opsTimeout bounds a call on a busy machine: a hang fails the test, a
// slow machine does not.
const opsTimeout = 30 * time.Second

// TestGRPCRequestID: the client's x-request-id (or a fresh one) reaches
// the v2 server and comes back in the response headers, also on a
// trailers-only refusal.
func TestGRPCRequestID(t *testing.T) {
	cc, v2 := grpcSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), opsTimeout)
	defer cancel()
	predict := grpctest.Predict(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", grpctest.F32Content)
	refused := grpctest.Predict(tfgrpc.ModelSpec{Name: "nope"}, "x", grpctest.F32Content)
	for _, tt := range []struct {
		name, sent string
		in         []byte
		code       codes.Code
	}{
		{"client's id", "req-42", predict, codes.OK},
		{"generated", "", predict, codes.OK},
		{"refusal keeps the client's id", "req-43", refused, codes.NotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cctx := ctx
			if tt.sent != "" {
				cctx = metadata.AppendToOutgoingContext(ctx, "x-request-id", tt.sent)
			}
			var out []byte
			var hdr, trl metadata.MD
			err := cc.Invoke(cctx, grpctest.PredictPath, &tt.in, &out, grpc.Header(&hdr), grpc.Trailer(&trl))
			if status.Code(err) != tt.code {
				t.Fatalf("status %v, want %v", err, tt.code)
			}
			got := hdr.Get("x-request-id")
			if tt.code != codes.OK {
				// A trailers-only answer: its headers are the trailers.
				got = trl.Get("x-request-id")
			}
			if len(got) != 1 {
				t.Fatalf("x-request-id %q: want one", got)
			}
			switch tt.sent {
			case "":
				if len(got[0]) != 36 || got[0] == tt.sent {
					t.Errorf("x-request-id %q: want a fresh UUID", got[0])
				}
			default:
				if got[0] != tt.sent {
					t.Errorf("x-request-id %q, want %q", got[0], tt.sent)
				}
			}
			if tt.code == codes.OK {
				v2.mu.Lock()
				md := v2.md
				v2.mu.Unlock()
				if up := md.Get("x-request-id"); len(up) != 1 || up[0] != got[0] {
					t.Errorf("v2 server got x-request-id %q, want %q", up, got[0])
				}
			}
		})
	}
}

// TestGRPCTracing: each call's span continues the client's traceparent.
func TestGRPCTracing(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })

	cc, _ := grpcSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), opsTimeout)
	defer cancel()
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	cctx := metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+traceID+"-"+parentID+"-01")
	in := grpctest.Predict(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", grpctest.F32Content)
	var out []byte
	if err := cc.Invoke(cctx, grpctest.PredictPath, &in, &out); err != nil {
		t.Fatal(err)
	}
	// The span ends as the handler returns, before the trailers go.
	var found bool
	for _, s := range rec.Ended() {
		if s.SpanKind().String() == "server" {
			found = true
			if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != parentID {
				t.Errorf("exchange span in trace %s under %s, want %s under %s",
					s.SpanContext().TraceID(), s.Parent().SpanID(), traceID, parentID)
			}
		}
	}
	if !found {
		t.Errorf("no server span among %d ended spans", len(rec.Ended()))
	}
}

// recordsHandler is a slog.Handler that sends every record to a channel.
type recordsHandler struct{ ch chan slog.Record }

func (h recordsHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordsHandler) Handle(_ context.Context, r slog.Record) error {
	h.ch <- r
	return nil
}
func (h recordsHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordsHandler) WithGroup(string) slog.Handler      { return h }

// TestGRPCAccessLog: one access line per call, with its method, status
// and request id; debug for OK, info otherwise.
func TestGRPCAccessLog(t *testing.T) {
	records := make(chan slog.Record, 64)
	cc, _, _ := grpcSetupWith(t, func(c *GRPCConfig) { c.Session.Logger = slog.New(recordsHandler{records}) })
	ctx, cancel := context.WithTimeout(context.Background(), opsTimeout)
	defer cancel()
	for _, tt := range []struct {
		name  string
		spec  string
		code  string
		level slog.Level
	}{
		{"ok", "half_plus_two", "0", slog.LevelDebug},
		{"refused", "nope", "5", slog.LevelInfo},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := grpctest.Predict(tfgrpc.ModelSpec{Name: tt.spec}, "x", grpctest.F32Content)
			var out []byte
			_ = cc.Invoke(metadata.AppendToOutgoingContext(ctx, "x-request-id", "id-"+tt.name), grpctest.PredictPath, &in, &out)
			for {
				var r slog.Record
				select {
				case r = <-records:
				case <-ctx.Done():
					t.Fatal("no access line")
				}
				if r.Message != "grpc call" {
					continue // the session's own lines
				}
				attrs := map[string]string{}
				r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
				if r.Level != tt.level || attrs["method"] != grpctest.PredictPath || attrs["grpc_status"] != tt.code ||
					attrs["request_id"] != "id-"+tt.name || attrs["peer"] == "" {
					t.Errorf("access line %v %v", r.Level, attrs)
				}
				return
			}
		})
	}
}

// TestGRPCHealth: grpc.health.v1 from a real health client, SERVING while
// ready and NOT_SERVING once not (draining), Watch told of the change.
func TestGRPCHealth(t *testing.T) {
	var draining atomic.Bool
	_, _, addr := grpcSetupWith(t, func(c *GRPCConfig) {
		c.Ready = func(context.Context) error {
			if draining.Load() {
				return errors.New("draining")
			}
			return nil
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), opsTimeout)
	defer cancel()
	check := func(service string) (healthpb.HealthCheckResponse_ServingStatus, codes.Code) {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		return resp.GetStatus(), status.Code(err)
	}
	for _, s := range []string{"", "tensorflow.serving.PredictionService", "tensorflow.serving.ModelService"} {
		if st, code := check(s); st != healthpb.HealthCheckResponse_SERVING || code != codes.OK {
			t.Errorf("Check(%q) = %v %v, want SERVING", s, st, code)
		}
	}
	if _, code := check("inference.GRPCInferenceService"); code != codes.NotFound {
		t.Errorf("Check(another service) = %v, want NotFound", code)
	}
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch first %v %v, want SERVING", m, err)
	}
	draining.Store(true)
	if st, code := check(""); st != healthpb.HealthCheckResponse_NOT_SERVING || code != codes.OK {
		t.Errorf("Check while draining = %v %v, want NOT_SERVING", st, code)
	}
	// The watch polls readiness: the change arrives within healthPoll.
	if m, err := w.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch next %v %v, want NOT_SERVING", m, err)
	}
}
