// Package inflight keeps count of a server's exchanges in progress, so
// that a graceful stop can tell how many finished while it drained and
// end the ones still running when its time is up.
package inflight

import (
	"context"
	"errors"
	"sync"
)

// MsgShutdown is TF's error text (status 503) for an exchange the
// shutdown cut before its answer began.
const MsgShutdown = "tfsbridge is shutting down and could not finish this request in time; retry it"

// ErrShutdown is the cause of an exchange's context cancelled by Cut: the
// server stopped before the exchange finished.
var ErrShutdown = errors.New("tfsbridge is shutting down")

// Tracker counts one server's exchanges. The zero value is ready to use;
// a nil *Tracker tracks nothing.
type Tracker struct {
	mu       sync.Mutex
	next     uint64
	live     map[uint64]func()
	draining bool
	cut      bool
	drained  int
}

// Start registers an exchange. The returned context is ctx, cancelled
// with cause ErrShutdown if Cut ends the exchange; call done when it ends.
// onCut, when set, runs in Cut (for adapters that can still answer).
func (t *Tracker) Start(ctx context.Context, onCut func()) (context.Context, func()) {
	if t == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t.mu.Lock()
	if t.live == nil {
		t.live = map[uint64]func(){}
	}
	id := t.next
	t.next++
	t.live[id] = func() {
		// The cause first: onCut may fail a read at once, and the
		// adapter then asks IsCut which answer the failure gets.
		cancel(ErrShutdown)
		if onCut != nil {
			onCut()
		}
	}
	t.mu.Unlock()
	return ctx, func() {
		t.mu.Lock()
		if _, ok := t.live[id]; ok {
			delete(t.live, id)
			if t.draining && !t.cut {
				t.drained++
			}
		}
		t.mu.Unlock()
		cancel(nil)
	}
}

// Drain marks the start of the graceful stop: exchanges that end from now
// on, until Cut, count as drained.
func (t *Tracker) Drain() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.draining = true
	t.mu.Unlock()
}

// Cut ends every exchange still in progress (their contexts are cancelled
// with cause ErrShutdown) and returns how many there were.
func (t *Tracker) Cut() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	t.cut = true
	fns := make([]func(), 0, len(t.live))
	for _, f := range t.live {
		fns = append(fns, f)
	}
	t.mu.Unlock()
	for _, f := range fns {
		f()
	}
	return len(fns)
}

// Drained returns how many exchanges finished between Drain and Cut.
func (t *Tracker) Drained() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.drained
}

// Active returns how many exchanges are in progress.
func (t *Tracker) Active() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.live)
}

// IsCut reports whether ctx is an exchange's context that Cut ended.
func IsCut(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrShutdown)
}
