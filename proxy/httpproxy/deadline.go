package httpproxy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadlineCtx is context.WithDeadline(parent, deadline) whose timer is
// armed only when something waits for it. The exchange's bounds (the
// body's ReadTimeout around the session's budget and metadata waits, the
// RequestTimeout of the upstream call) are read, in nearly every
// exchange, only as a Deadline and an Err that stays nil: nobody selects
// on Done, which is when the real context, with its timer (one more
// runtime timer per bound, whose arming can wake another thread), its
// allocations and its place among the parent's children, is made.
//
// Done, a derived context (WithCancel, AfterFunc: they call Done) and an
// Err past the deadline make the real context, which from then on
// answers everything; before that, Err and Value answer as it would:
// the parent's error (it would have been cancelled with the parent),
// DeadlineExceeded once the deadline has passed (made then, so that
// context.Cause agrees), the parent's values. stop is the CancelFunc.
type deadlineCtx struct {
	parent   context.Context
	deadline time.Time

	real    atomic.Pointer[madeCtx] // nil until needed
	stopped atomic.Bool
	mu      sync.Mutex // makes real once, orders it with stop
}

// madeCtx is a deadlineCtx's real context.
type madeCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// withDeadline returns parent bounded by d from now, lazily (see
// deadlineCtx); its stop is the CancelFunc (a method, not a func value:
// one allocation less).
func withDeadline(parent context.Context, d time.Duration) *deadlineCtx {
	deadline := time.Now().Add(d)
	if pd, ok := parent.Deadline(); ok && pd.Before(deadline) {
		deadline = pd
	}
	return &deadlineCtx{parent: parent, deadline: deadline}
}

// make returns the real context, making it if need be: after stop, one
// already cancelled, as the real one would be.
func (c *deadlineCtx) make() context.Context {
	if m := c.real.Load(); m != nil {
		return m.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.real.Load(); m != nil {
		return m.ctx
	}
	ctx, cancel := context.WithDeadline(c.parent, c.deadline)
	if c.stopped.Load() {
		cancel()
	}
	c.real.Store(&madeCtx{ctx: ctx, cancel: cancel})
	return ctx
}

func (c *deadlineCtx) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped.Store(true)
	if m := c.real.Load(); m != nil {
		m.cancel()
	}
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Done() <-chan struct{} { return c.make().Done() }

func (c *deadlineCtx) Err() error {
	if m := c.real.Load(); m != nil {
		return m.ctx.Err()
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if c.stopped.Load() || !time.Now().Before(c.deadline) {
		return c.make().Err()
	}
	return nil
}

// Value is the real context's value once it is made (after stop too, so
// that context.Cause says Canceled), the parent's before: the one
// difference a caller could see, context.Cause past the deadline before
// any Err or Done, is no cause where the real context would say
// DeadlineExceeded (every caller here asks Err first).
func (c *deadlineCtx) Value(key any) any {
	if m := c.real.Load(); m != nil {
		return m.ctx.Value(key)
	}
	if c.stopped.Load() {
		return c.make().Value(key)
	}
	return c.parent.Value(key)
}
