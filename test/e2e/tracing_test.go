package e2e

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tfsbridge/tfsbridge/proxy/tracing"
)

// A predict carrying a W3C traceparent (as Envoy or a client sends it)
// is traced as one exchange span under the caller's span, with the
// translations and the metadata calls below it.
func TestTracing(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(t.Context()) })

	const parent = "00f067aa0ba902b7"
	// One trace per transport: the recorder keeps every span.
	traceIDs := map[string]string{viaExtproc: "4bf92f3577b34e4ea0b4b24c5c1f4e36", viaExtprocFD: "6df92f3577b34e4ea0b4b24c5c1f4e38", viaProxy: "5cf92f3577b34e4ea0b4b24c5c1f4e37"}
	for _, via := range transports {
		t.Run(via, func(t *testing.T) {
			traceID := traceIDs[via]
			s := newStack(t, stackConfig{}) // cold metadata cache
			r := s.do(t, via, request{path: "/v1/models/half_plus_two:predict", body: readmeBody,
				header: map[string]string{"traceparent": "00-" + traceID + "-" + parent + "-01"}})
			checkResponse(t, r, ok(readmeResponse))

			var spans []sdktrace.ReadOnlySpan
			var exchange sdktrace.ReadOnlySpan
			if !waitFor(30*time.Second, func() bool {
				spans, exchange = nil, nil
				for _, sp := range rec.Ended() {
					if sp.SpanContext().TraceID().String() != traceID {
						continue
					}
					spans = append(spans, sp)
					if sp.Name() == tracing.SpanExchange {
						exchange = sp
					}
				}
				return exchange != nil
			}) {
				t.Fatalf("no exchange span in trace %s; spans: %v", traceID, names(spans))
			}
			if got := exchange.Parent().SpanID().String(); got != parent || !exchange.Parent().IsRemote() {
				t.Errorf("exchange span parent %s (remote %v), want the caller's %s", got, exchange.Parent().IsRemote(), parent)
			}
			if exchange.SpanKind() != trace.SpanKindServer {
				t.Errorf("exchange span kind %v", exchange.SpanKind())
			}
			attrs := map[attribute.Key]attribute.Value{}
			for _, kv := range exchange.Attributes() {
				attrs[kv.Key] = kv.Value
			}
			adapter := map[string]string{viaExtproc: "extproc", viaExtprocFD: "extproc", viaProxy: "http"}[via]
			if attrs[tracing.AttrVerb].AsString() != "predict" || attrs[tracing.AttrModel].AsString() != "half_plus_two" ||
				attrs[tracing.AttrStatus].AsInt64() != 200 || attrs[tracing.AttrAdapter].AsString() != adapter {
				t.Errorf("exchange attributes %v", exchange.Attributes())
			}
			want := map[string]bool{
				tracing.SpanTranslateRequest:      false,
				tracing.SpanTranslateResponse:     false,
				tracing.SpanBackend + " metadata": false,
				tracing.SpanBackend + " config":   false,
			}
			for _, sp := range spans {
				if _, ok := want[sp.Name()]; !ok {
					continue
				}
				want[sp.Name()] = true
				if sp.Parent().SpanID() != exchange.SpanContext().SpanID() {
					t.Errorf("%s: parent %s, want the exchange span %s", sp.Name(), sp.Parent().SpanID(), exchange.SpanContext().SpanID())
				}
			}
			for name, seen := range want {
				if !seen {
					t.Errorf("no %s span; spans: %v", name, names(spans))
				}
			}
		})
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, sp := range spans {
		out = append(out, sp.Name())
	}
	return out
}
