package inflight

import (
	"context"
	"testing"
)

// Exchanges that end while draining count as drained; Cut cancels the
// rest with ErrShutdown (running their onCut), and what ends after it is
// not drained.
func TestTracker(t *testing.T) {
	var tr Tracker
	var cuts int
	_, doneEarly := tr.Start(context.Background(), nil)
	doneEarly() // before the drain: not counted
	_, doneDrained := tr.Start(context.Background(), nil)
	ctxCut, doneCut := tr.Start(context.Background(), func() { cuts++ })
	tr.Drain()
	doneDrained()
	if tr.Active() != 1 {
		t.Fatalf("active %d, want 1", tr.Active())
	}
	if n := tr.Cut(); n != 1 || cuts != 1 {
		t.Fatalf("Cut = %d (onCut ran %d times), want 1", n, cuts)
	}
	if !IsCut(ctxCut) || ctxCut.Err() == nil {
		t.Errorf("the cut exchange's context: %v, cause %v", ctxCut.Err(), context.Cause(ctxCut))
	}
	doneCut()
	if tr.Drained() != 1 || tr.Active() != 0 {
		t.Errorf("drained %d, active %d; want 1, 0", tr.Drained(), tr.Active())
	}
	ctx, done := tr.Start(context.Background(), nil)
	done()
	if IsCut(ctx) {
		t.Error("an exchange that ended on its own counts as cut")
	}
	var none *Tracker
	_, d := none.Start(context.Background(), nil)
	d()
	if none.Cut() != 0 || none.Drained() != 0 || none.Active() != 0 {
		t.Error("a nil Tracker tracks something")
	}
}
