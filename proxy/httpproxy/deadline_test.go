package httpproxy

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

type ctxKey struct{}

// deadlineCtx answers as context.WithDeadline would, and makes its timer
// only for a caller that waits: before the deadline Err is nil and no
// real context exists; Done, a derived context, an Err past the deadline
// or stop make it, and it ends as the real one would (parent's cause,
// DeadlineExceeded, Canceled).
func TestDeadlineCtx(t *testing.T) {
	cause := errors.New("gone")
	for _, tc := range []struct {
		name      string
		d         time.Duration
		act       func(c *deadlineCtx, stop context.CancelFunc, cancelParent context.CancelCauseFunc)
		wantErr   error
		wantCause error
	}{
		{"running", time.Hour, func(*deadlineCtx, context.CancelFunc, context.CancelCauseFunc) {}, nil, nil},
		{"deadline passed", time.Nanosecond, func(c *deadlineCtx, _ context.CancelFunc, _ context.CancelCauseFunc) {
			// The event is the clock passing the deadline (1 ns away).
			for d, _ := c.Deadline(); !time.Now().After(d); {
				runtime.Gosched()
			}
		}, context.DeadlineExceeded, context.DeadlineExceeded},
		{"parent cancelled", time.Hour, func(_ *deadlineCtx, _ context.CancelFunc, cp context.CancelCauseFunc) {
			cp(cause)
		}, context.Canceled, cause},
		{"stopped", time.Hour, func(_ *deadlineCtx, stop context.CancelFunc, _ context.CancelCauseFunc) {
			stop()
		}, context.Canceled, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancelParent := context.WithCancelCause(context.WithValue(context.Background(), ctxKey{}, "v"))
			defer cancelParent(nil)
			before := time.Now()
			c := withDeadline(parent, tc.d)
			stop := context.CancelFunc(c.stop)
			defer stop()
			if d, ok := c.Deadline(); !ok || d.Before(before.Add(tc.d)) || d.After(time.Now().Add(tc.d)) {
				t.Errorf("Deadline() = %v, %v", d, ok)
			}
			if c.Value(ctxKey{}) != "v" {
				t.Errorf("Value = %v", c.Value(ctxKey{}))
			}
			tc.act(c, stop, cancelParent)
			if err := c.Err(); !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Err() = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && c.real.Load() != nil {
				t.Fatal("the real context was made without a waiter")
			}
			if got := context.Cause(c); !errors.Is(got, tc.wantCause) || (tc.wantCause == nil) != (got == nil) {
				t.Errorf("Cause = %v, want %v", got, tc.wantCause)
			}
			done := c.Done()
			if tc.wantErr == nil {
				select {
				case <-done:
					t.Fatal("Done closed while running")
				default:
				}
				// A derived context follows it: ending c ends the child.
				child, cancelChild := context.WithCancel(c)
				defer cancelChild()
				stop()
				<-child.Done()
				if !errors.Is(c.Err(), context.Canceled) {
					t.Errorf("after stop: Err() = %v", c.Err())
				}
				return
			}
			<-done // closed: the real context ended as c did
			if c.Value(ctxKey{}) != "v" {
				t.Errorf("Value after the end = %v", c.Value(ctxKey{}))
			}
		})
	}
}

// The real context, once made for a waiter, ends at the deadline by its
// own timer.
func TestDeadlineCtxTimer(t *testing.T) {
	c := withDeadline(context.Background(), 20*time.Millisecond)
	defer c.stop()
	select {
	case <-c.Done():
	case <-time.After(time.Minute): // generous: the timer is 20 ms
		t.Fatal("Done not closed by the deadline")
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(c), context.DeadlineExceeded) {
		t.Errorf("Err() = %v, Cause = %v", c.Err(), context.Cause(c))
	}
}
