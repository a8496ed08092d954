package tracing

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func envOf(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestSetup(t *testing.T) {
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	tests := []struct {
		name    string
		env     map[string]string
		enabled bool
		wantErr string
	}{
		{"off", nil, false, ""},
		{"blank endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, false, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, ""},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, ""},
		{"json", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, true, ""},
		{"grpc refused", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, "OTLP over HTTP"},
		{"traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			otel.SetTracerProvider(prev)
			if got := Enabled(envOf(tt.env)); got != tt.enabled {
				t.Errorf("Enabled = %v, want %v", got, tt.enabled)
			}
			shutdown, err := Setup(context.Background(), envOf(tt.env), "v1.2.3")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Setup error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = shutdown(context.Background()) }()
			_, isSDK := otel.GetTracerProvider().(*sdktrace.TracerProvider)
			if isSDK != tt.enabled {
				t.Errorf("SDK provider installed = %v, want %v", isSDK, tt.enabled)
			}
		})
	}
}

// A traceparent is continued; a missing or malformed one starts a trace;
// Answered records the outcome and marks 5xx as errors.
func TestExchangeSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	const tid, sid = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	for _, tt := range []struct {
		traceparent string
		continued   bool
		status      int
		errStatus   bool
	}{
		{"00-" + tid + "-" + sid + "-01", true, 200, false},
		{"", false, 503, true},
		{"00-zz-" + sid + "-01", false, 404, false},
	} {
		rec.Reset()
		h := map[string]string{"traceparent": tt.traceparent}
		ctx, span := StartExchange(context.Background(), "http", func(k string) string { return h[k] })
		_, child := Start(ctx, SpanTranslateRequest)
		child.End()
		Answered(span, "predict", strings.Repeat("m", 300), tt.status)
		span.End()
		ended := rec.Ended()
		if len(ended) != 2 {
			t.Fatalf("%d spans ended, want 2", len(ended))
		}
		ex := ended[1]
		if got := ex.SpanContext().TraceID().String() == tid; got != tt.continued {
			t.Errorf("traceparent %q: continued %v, want %v", tt.traceparent, got, tt.continued)
		}
		if ended[0].Parent().SpanID() != ex.SpanContext().SpanID() {
			t.Errorf("translation span not under the exchange")
		}
		if (ex.Status().Code.String() == "Error") != tt.errStatus {
			t.Errorf("status %d: span status %v", tt.status, ex.Status())
		}
		for _, kv := range ex.Attributes() {
			if kv.Key == AttrModel && len(kv.Value.AsString()) != maxModelAttrLen {
				t.Errorf("model attribute %d bytes, want truncated to %d", len(kv.Value.AsString()), maxModelAttrLen)
			}
		}
	}
}

// While no TracerProvider is installed, starting spans allocates nothing
// (Start, StartBackend) or only what extracting Envoy's context needs
// (StartExchange), and the trace context still propagates.
func TestOffCostsNothing(t *testing.T) {
	if !off() {
		t.Skip("a TracerProvider is installed")
	}
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	get := func(k string) string {
		if k == "traceparent" {
			return parent
		}
		return ""
	}
	ctx, span := StartExchange(context.Background(), "extproc", get)
	if span.IsRecording() || span.SpanContext().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("exchange span: recording %v, context %v", span.IsRecording(), span.SpanContext())
	}
	if n := testing.AllocsPerRun(100, func() {
		_, s := Start(ctx, SpanTranslateRequest)
		s.End()
		_, s = StartBackend(ctx, "metadata", "/v2/models/m")
		s.End()
	}); n != 0 {
		t.Errorf("Start and StartBackend with tracing off: %v allocs, want 0", n)
	}
	h := http.Header{}
	Inject(ctx, h)
	if got := h.Get("traceparent"); got != parent {
		t.Errorf("propagated traceparent %q, want %q", got, parent)
	}
}
