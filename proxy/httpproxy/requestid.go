package httpproxy

import (
	"net/http"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// headerRequestID is the request id header, as Envoy names it.
const headerRequestID = "X-Request-Id"

// WithRequestID gives every exchange a request id and every answer an
// X-Request-Id header: the client's (or a front proxy's) when sane, else
// a fresh one, which is also set on the request so that the session logs
// it and the v2 server receives it. The answer's header overrides one the
// v2 server may have sent, so the client sees the id tfsbridge logged.
func WithRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := observe.RequestID(r.Header.Get(headerRequestID))
		r.Header.Set(headerRequestID, id)
		next.ServeHTTP(&idWriter{ResponseWriter: w, id: id}, r)
	})
}

// idWriter sets X-Request-Id just before the final response headers go.
type idWriter struct {
	http.ResponseWriter
	id    string
	final bool
}

func (w *idWriter) WriteHeader(code int) {
	if !w.final {
		w.Header().Set(headerRequestID, w.id)
		w.final = code >= 200
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *idWriter) Write(b []byte) (int, error) {
	if !w.final {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// flushes, hijacking).
func (w *idWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
