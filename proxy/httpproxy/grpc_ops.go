package httpproxy

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/tracing"
)

// The TF gRPC listener's operations, as the REST proxy's: every call
// gets a request id (WithRequestID: the client's x-request-id when sane,
// else a fresh one, echoed in the response headers, which are the
// trailers of a trailers-only answer), a span continuing the client's
// traceparent, and an access line; and the listener answers
// grpc.health.v1.Health itself.

// handler is the listener's whole handler: request id, then the span,
// then the access line around the call. Health checks (every few
// seconds from each checker) get neither span nor access line, as
// /readyz on the admin port.
func (p *GRPCProxy) handler() http.Handler {
	return WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.health(w, r) {
			return
		}
		ctx, span := tracing.StartExchange(r.Context(), "grpc", r.Header.Get)
		defer span.End()
		r = r.WithContext(ctx)
		defer p.access(w, r, time.Now())
		p.ServeHTTP(w, r)
	}))
}

// access writes a call's access line once it is answered: debug for OK
// (as the session's line for a success), info otherwise. Its status is
// the one the client reads: the trailers' grpc-status, or the headers'
// of a trailers-only answer; none means the stream was cut.
func (p *GRPCProxy) access(w http.ResponseWriter, r *http.Request, t0 time.Time) {
	h := w.Header()
	code := h.Get(http.TrailerPrefix + "Grpc-Status")
	if code == "" {
		code = h.Get("Grpc-Status")
	}
	level := slog.LevelInfo
	if code == "0" {
		level = slog.LevelDebug
	}
	if code == "" {
		code = "aborted"
	}
	if !p.log.Enabled(r.Context(), level) {
		return
	}
	p.log.LogAttrs(r.Context(), level, "grpc call",
		slog.String("method", r.URL.Path), slog.String("grpc_status", code),
		slog.String("request_id", r.Header.Get(headerRequestID)), slog.String("peer", r.RemoteAddr),
		observe.DurationMS("elapsed", time.Since(t0)))
}

// gRPC health checking (grpc.health.v1), hand-written over protowire:
// the listener is an http.Handler, not a grpc.Server.
const (
	healthCheck = "/grpc.health.v1.Health/Check"
	healthWatch = "/grpc.health.v1.Health/Watch"
	// healthServing and healthNotServing are HealthCheckResponse's
	// ServingStatus values.
	healthServing    = 1
	healthNotServing = 2
	// healthPoll is how often a Watch stream asks the readiness again.
	healthPoll = time.Second
	// maxHealthRequest bounds a HealthCheckRequest (a service name).
	maxHealthRequest = 4 << 10
)

// healthServices are the names the listener answers for: "" (the
// server) and the TF services it serves.
var healthServices = map[string]bool{
	"":                                     true,
	"tensorflow.serving.PredictionService": true,
	"tensorflow.serving.ModelService":      true,
}

// health answers a grpc.health.v1.Health call, reporting whether r was
// one: SERVING while GRPCConfig.Ready passes (always without one),
// NOT_SERVING while it fails (draining), NOT_FOUND for another service.
// Watch sends the status and each change, and ends after reporting
// NOT_SERVING (a client watches again) so that a draining listener's
// shutdown does not wait on it.
func (p *GRPCProxy) health(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != healthCheck && r.URL.Path != healthWatch {
		return false
	}
	h := w.Header()
	h.Set("Content-Type", "application/grpc")
	service, ok := healthRequest(r.Body)
	switch {
	case !ok:
		h.Set("Grpc-Status", "13") // INTERNAL, as grpc-go answers a bad message
		h.Set("Grpc-Message", "grpc: error unmarshalling request")
		w.WriteHeader(http.StatusOK)
		return true
	case !healthServices[service]:
		h.Set("Grpc-Status", "5")
		h.Set("Grpc-Message", "unknown service")
		w.WriteHeader(http.StatusOK)
		return true
	}
	h.Set("Trailer", "Grpc-Status")
	status := p.healthStatus(r.Context())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(healthResponse(status))
	if r.URL.Path == healthWatch {
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		t := time.NewTicker(healthPoll)
		defer t.Stop()
		for status == healthServing {
			select {
			case <-r.Context().Done():
				return true
			case <-t.C:
			}
			if status = p.healthStatus(r.Context()); status != healthServing {
				_, _ = w.Write(healthResponse(status))
			}
		}
	}
	h.Set("Grpc-Status", "0")
	return true
}

// healthStatus asks the readiness now.
func (p *GRPCProxy) healthStatus(ctx context.Context) int {
	if p.cfg.Ready != nil && p.cfg.Ready(ctx) != nil {
		return healthNotServing
	}
	return healthServing
}

// healthRequest reads a HealthCheckRequest's service (field 1) from its
// one uncompressed message.
func healthRequest(body io.Reader) (string, bool) {
	b, err := io.ReadAll(io.LimitReader(body, maxHealthRequest+1))
	if err != nil || len(b) < 5 || len(b) > maxHealthRequest || b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5 {
		return "", false
	}
	msg, service := b[5:], ""
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return "", false
		}
		msg = msg[n:]
		if num == 1 && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				return "", false
			}
			service, msg = string(v), msg[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, msg)
		if m < 0 {
			return "", false
		}
		msg = msg[m:]
	}
	return service, true
}

// healthResponse is a framed HealthCheckResponse{status}.
func healthResponse(status int) []byte {
	msg := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(status))
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}
