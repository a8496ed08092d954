package extproc

import (
	"runtime"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/poll"
)

// TestWorkers checks that a worker is reused for the next function, that
// no more than max wait, and that the idle ones end after keep.
func TestWorkers(t *testing.T) {
	base := runtime.NumGoroutine()
	// keep is an hour while reuse is checked: a busy machine may take
	// longer than any short keep between the two functions.
	w := newWorkers(1, time.Hour)
	ids := make(chan int64, 2)
	done := make(chan struct{})
	job := func() { ids <- goid(); done <- struct{}{} }
	w.run(job) // no worker waits yet: a goroutine of its own
	<-done
	// The second goes to the worker the first left waiting. A blocking
	// send, not run's: run gives up (and starts a goroutine) when the
	// worker has not reached its wait yet, which a busy machine can delay.
	handOff(t, w, job)
	<-done
	if a, b := <-ids, <-ids; a != b {
		t.Errorf("the second function ran on goroutine %d, not on the idle worker %d", b, a)
	}
	// Two at once, with a short keep (the worker reads it when it next
	// waits): the first goes to the idle worker, the second, with no
	// worker left waiting, gets a goroutine of its own; once both are
	// done only one stays (max 1), and it ends after keep.
	w.keep.Store(int64(50 * time.Millisecond))
	release := make(chan struct{})
	handOff(t, w, func() { <-release })
	w.run(func() { <-release })
	close(release)
	if !poll.Until(10*time.Second, func() bool { return w.idle.Load() == 0 && runtime.NumGoroutine() <= base }) {
		t.Fatalf("%d idle workers and %d goroutines after keep, want 0 and at most %d", w.idle.Load(), runtime.NumGoroutine(), base)
	}
}

// handOff gives f to w's waiting worker, failing t if none takes it
// within a generous bound (a busy machine delays the worker's wait).
func handOff(t *testing.T, w *workers, f func()) {
	t.Helper()
	select {
	case w.jobs <- f:
	case <-time.After(10 * time.Second):
		t.Fatal("no idle worker took the function")
	}
}

// goid identifies the calling goroutine by its stack's first line.
func goid() int64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	var id int64
	for _, c := range buf[len("goroutine "):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + int64(c-'0')
	}
	return id
}
