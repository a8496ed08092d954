package extproc

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/tfsbridge/tfsbridge/proxy/tracing"
)

// streamTrace is the state every message of one stream shares: the
// tracing state (the exchange's span starts at the request headers, which
// carry Envoy's traceparent, and every later message of the stream runs
// in its context), and the room its replies are built in.
type streamTrace struct {
	ctx  context.Context
	span trace.Span
	// rooms holds the stream's replies (see replyRoom); nil until the
	// first reply.
	rooms *replyRooms
}

// begin starts the exchange span once, continuing Envoy's trace.
func (st *streamTrace) begin(h headerMap) context.Context {
	if st.span == nil {
		st.ctx, st.span = tracing.StartExchange(st.ctx, "extproc", h.Get)
	}
	return st.ctx
}

// end ends the exchange span, when one was started, and gives the
// stream's reply rooms back: the stream sends no more replies.
func (st *streamTrace) end() {
	if st.span != nil {
		st.span.End()
	}
	st.freeRooms()
}
