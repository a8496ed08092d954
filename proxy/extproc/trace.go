package extproc

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/tfsbridge/tfsbridge/proxy/tracing"
)

// streamTrace is the tracing state of one stream: the exchange's span
// starts at the request headers, which carry Envoy's traceparent, and
// every later message of the stream runs in its context.
type streamTrace struct {
	ctx  context.Context
	span trace.Span
}

// begin starts the exchange span once, continuing Envoy's trace.
func (st *streamTrace) begin(h headerMap) context.Context {
	if st.span == nil {
		st.ctx, st.span = tracing.StartExchange(st.ctx, "extproc", h.Get)
	}
	return st.ctx
}

// end ends the exchange span, when one was started.
func (st *streamTrace) end() {
	if st.span != nil {
		st.span.End()
	}
}
