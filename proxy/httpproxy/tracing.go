package httpproxy

import (
	"net/http"

	"github.com/tfsbridge/tfsbridge/proxy/tracing"
)

// WithTracing runs every exchange in a span that continues the trace the
// request's traceparent names; the session's spans hang below it.
func WithTracing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// headerGetter: the propagators ask for "traceparent" and "baggage"
		// in lower case, which http.Header.Get canonicalises into a new
		// string every time.
		ctx, span := tracing.StartExchange(r.Context(), "http", headerGetter(r.Header).Get)
		defer span.End()
		if ctx != r.Context() {
			// Without a trace to continue and with tracing off the context
			// is the request's own: no copy of the request for nothing.
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}
