// Package tracing is tfsbridge's OpenTelemetry tracing: the exporter setup
// from the standard OTEL_* environment variables (off unless an OTLP
// endpoint is set), the W3C trace context that Envoy or a client sends,
// and the spans of an exchange — the exchange itself, the request and
// response translations and the calls to the v2 server — with model,
// verb and status attributes.
//
// Spans come from the global tracer provider: a no-op one until Setup
// installs the SDK's, so an untraced tfsbridge pays for no more than the
// context lookups.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation names tfsbridge's tracer.
const instrumentation = "github.com/tfsbridge/tfsbridge"

// Span names.
const (
	SpanExchange          = "tfsbridge.exchange"
	SpanTranslateRequest  = "tfsbridge.translate_request"
	SpanTranslateResponse = "tfsbridge.translate_response"
	SpanBackend           = "tfsbridge.backend"
)

// Attribute keys.
const (
	AttrAdapter     = attribute.Key("tfsbridge.adapter") // extproc, http
	AttrVerb        = attribute.Key("tfsbridge.verb")    // predict, status, metadata, ...
	AttrModel       = attribute.Key("tfsbridge.model")
	AttrCall        = attribute.Key("tfsbridge.backend.call") // metadata, config, ready, server
	AttrStatus      = attribute.Key("http.response.status_code")
	AttrURLPath     = attribute.Key("url.path")
	maxModelAttrLen = 255 // model names come from URLs
)

// propagator reads and writes W3C traceparent/tracestate and baggage. It
// is ours rather than the global one so that the trace context Envoy
// sends is continued whatever else set the global.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

func tracer() trace.Tracer { return otel.GetTracerProvider().Tracer(instrumentation) }

// defaultProvider is the global TracerProvider before anyone installs
// one (Setup, or a test): otel's delegating no-op. While it is in force
// no span can record, and starting one through it still costs two
// allocations and a tracer lookup per span; off skips that.
var defaultProvider = otel.GetTracerProvider()

// off reports that tracing is off: no TracerProvider was installed.
func off() bool { return otel.GetTracerProvider() == defaultProvider }

// noSpan is what Start and StartBackend return while tracing is off:
// every method is a no-op, and ctx keeps its span (whose context, for
// propagation, is the one the no-op child would have carried anyway).
var noSpan = trace.SpanFromContext(context.Background())

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint is set for traces or for all signals.
func Enabled(env func(string) (string, bool)) bool {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v, ok := env(k); ok && strings.TrimSpace(v) != "" {
			return true
		}
	}
	return false
}

// Setup installs an OTLP/HTTP exporter and the SDK's tracer provider as
// the global one when Enabled(env); the exporter, sampler, batching and
// resource read their own OTEL_* variables (OTEL_SERVICE_NAME defaults to
// tfsbridge). It returns the shutdown that flushes pending spans; without
// an endpoint, a no-op.
func Setup(ctx context.Context, env func(string) (string, bool), version string) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	if !Enabled(env) {
		return noop, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v, ok := env(k); ok && v != "" {
			if v != "http/protobuf" && v != "http/json" {
				return noop, fmt.Errorf("tracing: %s=%q: tfsbridge exports OTLP over HTTP (http/protobuf or http/json)", k, v)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return noop, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "tfsbridge"), attribute.String("service.version", version)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return noop, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
	return tp.Shutdown, nil
}

// getter adapts a header lookup (ext_proc's header list, http.Header) to
// a propagation carrier for extraction.
type getter struct {
	get func(string) string
}

func (g getter) Get(key string) string { return g.get(key) }
func (getter) Set(string, string)      {}
func (getter) Keys() []string          { return nil }

// StartExchange starts the span of one exchange on adapter ("extproc",
// "http"), continuing the trace whose traceparent get returns (Envoy's or
// the client's), and returns the context carrying it.
func StartExchange(ctx context.Context, adapter string, get func(string) string) (context.Context, trace.Span) {
	ctx = propagator.Extract(ctx, getter{get})
	if off() {
		// The extracted remote span context, as the no-op tracer's span
		// would carry it, without building that span.
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracer().Start(ctx, SpanExchange, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(AttrAdapter.String(adapter)))
}

// Start starts an internal span (a translation) under ctx's span.
func Start(ctx context.Context, name string) (context.Context, trace.Span) {
	if off() {
		return ctx, noSpan
	}
	return tracer().Start(ctx, name)
}

// StartBackend starts the client span of one call to the v2 server.
func StartBackend(ctx context.Context, call, path string) (context.Context, trace.Span) {
	if off() {
		return ctx, noSpan
	}
	return tracer().Start(ctx, SpanBackend+" "+call, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrCall.String(call), AttrURLPath.String(path)))
}

// Inject writes ctx's trace context into h, for the v2 server.
func Inject(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Answered records the outcome of an exchange on its span: verb, model
// and HTTP status; a 5xx marks the span as an error.
func Answered(span trace.Span, verb, model string, status int) {
	if !span.IsRecording() {
		return
	}
	if len(model) > maxModelAttrLen {
		model = model[:maxModelAttrLen]
	}
	span.SetAttributes(AttrVerb.String(verb), AttrModel.String(model), AttrStatus.Int(status))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
}

// Failed marks span as failed with err (nil leaves it unset).
func Failed(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}
