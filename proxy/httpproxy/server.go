package httpproxy

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
)

// Defaults of the client-side timeouts. Without them a client that sends
// its headers and then trickles, or never sends, the body it announced
// holds a connection and a goroutine forever, and a few thousand such
// clients exhaust the proxy. A minute reads a 64 MiB body at about
// 9 Mbit/s.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = time.Minute
	DefaultIdleTimeout       = 2 * time.Minute
	// DefaultWriteTimeout is the write deadline of a translated answer:
	// a client that stops reading one holds its buffer (as large as 32×
	// --max-body-bytes allows) and a goroutine until the deadline cuts it.
	DefaultWriteTimeout = time.Minute
)

// NewServer returns the http.Server that serves p: Config.ReadHeaderTimeout
// and Config.IdleTimeout are the server's; Config.ReadTimeout and
// Config.WriteTimeout are enforced by the Proxy itself, per exchange (see
// ServeHTTP). The server has no write timeout of its own: pass-through
// responses may stream for as long as they like.
func (p *Proxy) NewServer(errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           p,
		ReadHeaderTimeout: p.cfg.ReadHeaderTimeout,
		IdleTimeout:       p.cfg.IdleTimeout,
		ErrorLog:          errorLog,
	}
}

// watchBody wraps r's body so that the handler can tell why reading it
// failed, and gives the client until now+d to send it: reads past that
// fail with a timeout, the translated exchange answers a TF 400 and a
// pass-through one 408, and the connection is closed. The deadline is
// lifted once the body has been read to its end. Deadlines are skipped for
// a ResponseWriter without them (tests).
//
// It is set here rather than as http.Server.ReadTimeout so that the
// handler can tell a body that timed out, or ended early, from a client
// that went away: Go cancels the request's context on any body read
// error, and a handler that then returns without writing leaves the
// client an empty 200.
func watchBody(w *answerWriter, r *http.Request, d time.Duration) *clientBody {
	b := &clientBody{ReadCloser: r.Body}
	if w.rc.SetReadDeadline(time.Now().Add(d)) == nil {
		b.rc = w.rc // the answer's controller: one per exchange
	}
	r.Body = b
	return b
}

// clientBody lifts the connection's read deadline at the end of the body,
// so that it does not outlive the upload, and remembers how reading it
// failed: a timeout (too slow, may still listen) or an early end (a
// Content-Length or chunked body cut short, e.g. by a half-close).
type clientBody struct {
	io.ReadCloser
	rc        *http.ResponseController // nil without deadlines
	timedOut  atomic.Bool
	truncated atomic.Bool

	mu      sync.Mutex // orders the end of the body and a cut
	ended   bool       // read to its end: the deadline is lifted
	gaveWay atomic.Bool
}

// giveWayOn ends a read in progress when r is wounded (an older
// exchange needs the in-flight budget this body holds, package
// admission): the read deadline moves to now, and the failed read is the
// exchange's 503, not a timeout. stop ends the watch. Nothing runs, and
// no goroutine waits, unless the wound comes (Reservation.OnWound).
func (b *clientBody) giveWayOn(r *admission.Reservation) (stop func()) {
	if b == nil || r == nil {
		return func() {}
	}
	r.OnWound(b.giveWay)
	return func() { r.OnWound(nil) }
}

// giveWay ends the body's read in progress for an older exchange.
func (b *clientBody) giveWay() {
	b.gaveWay.Store(true)
	if b.rc != nil {
		_ = b.rc.SetReadDeadline(time.Now())
	}
}

// GaveWay reports that the body's read was ended for an older exchange
// (false for nil).
func (b *clientBody) GaveWay() bool { return b != nil && b.gaveWay.Load() }

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == nil:
	case err == io.EOF:
		if b.rc != nil {
			b.mu.Lock()
			if !b.ended {
				b.ended = true
				_ = b.rc.SetReadDeadline(time.Time{})
			}
			b.mu.Unlock()
		}
	case errors.Is(err, io.ErrUnexpectedEOF):
		b.truncated.Store(true)
	case isTimeout(err):
		b.timedOut.Store(true)
	}
	return n, err
}

// isTimeout reports a net.Error timeout (its target escapes: only a
// failed read pays for it).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// cut ends a body read in progress at once (the shutdown's time ran out):
// the read fails and the exchange is answered TF's 503. A body already
// read is left alone: a read deadline then would fail net/http's
// background read, which cancels the request as if the client had gone.
func (b *clientBody) cut() {
	if b == nil || b.rc == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ended {
		_ = b.rc.SetReadDeadline(time.Now())
	}
}

// TimedOut reports that the body's read deadline passed (false for nil).
func (b *clientBody) TimedOut() bool { return b != nil && b.timedOut.Load() }

// Truncated reports that the body ended before its declared end (false
// for nil).
func (b *clientBody) Truncated() bool { return b != nil && b.truncated.Load() }
