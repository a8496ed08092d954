package httpproxy

import (
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// answerWriter is the client's ResponseWriter for one exchange. It knows
// whether the answer has begun (a panic after that can only abort the
// connection), sets and lifts the connection's write deadline, and counts
// an answer the deadline cut (tfsbridge_response_write_timeouts_total).
type answerWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	metrics  *observe.Metrics
	started  bool
	timedOut bool
}

// Unwrap lets http.ResponseController (ReverseProxy's flushes, the
// deadlines) reach the server's writer.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *answerWriter) WriteHeader(code int) {
	if code >= 200 {
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *answerWriter) Write(b []byte) (int, error) {
	w.started = true
	n, err := w.ResponseWriter.Write(b)
	if err != nil && !w.timedOut && errors.Is(err, os.ErrDeadlineExceeded) {
		w.timedOut = true
		w.metrics.WriteTimeout()
	}
	return n, err
}

// flush sends what the answer has buffered to the client; a failure the
// write deadline caused is counted as Write counts it, and the
// connection, whose write failed, is closed by net/http.
func (w *answerWriter) flush() {
	if err := w.rc.Flush(); err != nil && !w.timedOut && errors.Is(err, os.ErrDeadlineExceeded) {
		w.timedOut = true
		w.metrics.WriteTimeout()
	}
}

// deadline gives the client d from now to take in the answer. It is set
// per exchange, when the answer is ready, so that the upstream's time does
// not count; the server's final flush after the handler returns is under
// it too, and net/http lifts it before the connection's next request, so
// pass-through answers stream without one. A writer without deadlines
// (tests) is left alone.
func (w *answerWriter) deadline(d time.Duration) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(d))
}
