package extproc

import (
	"sync/atomic"
	"time"
)

// workers runs functions on goroutines kept for a while once they are
// done, for the next function to reuse: a full-duplex stream receives on a
// goroutine of its own, and a fresh goroutine grew its stack to the depth
// of protobuf's decoding on every stream (runtime.newstack and copystack
// were about half of that goroutine's CPU, ~16 µs of a small exchange's).
// grpc.NumStreamWorkers does the same for the streams themselves.
type workers struct {
	jobs chan func()
	idle atomic.Int32
	// max is how many goroutines may wait for work at once; keep is how
	// long one waits before it ends (a time.Duration, atomic so that it
	// can be changed while workers wait: TestWorkers checks reuse with a
	// long keep and expiry with a short one).
	max  int32
	keep atomic.Int64
}

func newWorkers(maxIdle int, keep time.Duration) *workers {
	w := &workers{jobs: make(chan func()), max: int32(maxIdle)}
	w.keep.Store(int64(keep))
	return w
}

// workerKeep is how long an idle receive goroutine waits for the next
// stream: long enough for back-to-back requests, short enough that
// goroutines return to their count soon after a burst.
const workerKeep = time.Second

// run runs f on an idle goroutine, or on a new one when none waits.
func (w *workers) run(f func()) {
	select {
	case w.jobs <- f:
	default:
		go w.loop(f)
	}
}

// loop runs f, then the functions handed to it, until it has waited keep
// for one or max goroutines already wait.
func (w *workers) loop(f func()) {
	var t *time.Timer
	for {
		f()
		f = nil // nothing of the last job is held while waiting
		if w.idle.Add(1) > w.max {
			w.idle.Add(-1)
			return
		}
		if t == nil {
			t = time.NewTimer(time.Duration(w.keep.Load()))
		} else {
			t.Reset(time.Duration(w.keep.Load()))
		}
		select {
		case f = <-w.jobs:
			w.idle.Add(-1)
			t.Stop()
		case <-t.C:
			w.idle.Add(-1)
			return
		}
	}
}
