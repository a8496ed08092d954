package session

import (
	"errors"
	"fmt"
	"runtime/debug"

	"golang.org/x/sync/errgroup"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// Recover answers an exchange whose handling panicked: the adapters call
// it from the deferred function that recovered v, so that one exchange's
// bug costs that exchange only, never the process (ext_proc) or an
// answerless connection (proxy). It logs the panic at error level with the
// request id and the stack, counts it in tfsbridge_panics_total{adapter},
// and returns TF's 500. The session is done afterwards: later events are
// ignored and Close counts nothing more.
func (s *Session) Recover(adapter string, v any) Action {
	p := observe.CapturePanic(v)
	if s.requestID == "" {
		s.requestID = observe.NewRequestID()
	}
	log := s.Logger()
	log.Error("panic while handling an exchange; answered 500", "adapter", adapter,
		"route", s.rt.tf.String(), "panic", fmt.Sprint(p.Value), "stack", string(p.Stack))
	s.cfg.Metrics.Panic(adapter)
	e := apierr.Errorf(apierr.Internal,
		"Internal error in tfsbridge while handling this request (request id %s)", s.requestID)
	s.settleSafely(e)
	if s.grpc != nil {
		return grpcErrorResponse(e)
	}
	return errorResponse(e)
}

// settleSafely settles an exchange that already panicked once: if that
// panics too (the metrics were the culprit), the count is lost but the
// answer is not.
func (s *Session) settleSafely(e *apierr.Error) {
	defer func() {
		if v := recover(); v != nil {
			s.finished, s.state = true, stDone
			s.Logger().Error("panic while counting a failed exchange", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	s.settle(e.HTTPStatus(), e)
}

// repanic re-raises, on the exchange's goroutine, a panic that a helper
// goroutine recovered and returned as an error.
func repanic(err error) {
	var p *observe.Panic
	if errors.As(err, &p) {
		panic(p)
	}
}

// goSafely runs f on g, turning a panic into an *observe.Panic error that
// the exchange's goroutine re-raises with repanic after g.Wait.
func goSafely(g *errgroup.Group, f func() error) {
	g.Go(func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = observe.CapturePanic(v)
			}
		}()
		return f()
	})
}
