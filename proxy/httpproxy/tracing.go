package httpproxy

import (
	"net/http"

	"github.com/tfsbridge/tfsbridge/proxy/tracing"
)

// WithTracing runs every exchange in a span that continues the trace the
// request's traceparent names; the session's spans hang below it.
func WithTracing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tracing.StartExchange(r.Context(), "http", r.Header.Get)
		defer span.End()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
