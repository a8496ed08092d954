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
	w := newWorkers(1, 200*time.Millisecond)
	ids := make(chan int64, 2)
	done := make(chan struct{})
	for range 2 {
		// One at a time: the second runs once the first is done, on the
		// worker the first left waiting (poll for it: it waits only once
		// its function has returned).
		w.run(func() { ids <- goid(); done <- struct{}{} })
		<-done
		// Generous deadline: on a busy machine the worker may take a while
		// to reach its wait.
		if !poll.Until(10*time.Second, func() bool { return w.idle.Load() == 1 }) {
			t.Fatalf("idle workers %d, want 1", w.idle.Load())
		}
	}
	if a, b := <-ids, <-ids; a != b {
		t.Errorf("the second function ran on goroutine %d, not on the idle worker %d", b, a)
	}
	// Two at once: the second gets a goroutine of its own, and only one of
	// them stays (max 1).
	release := make(chan struct{})
	for range 2 {
		w.run(func() { <-release })
	}
	close(release)
	if !poll.Until(10*time.Second, func() bool { return w.idle.Load() == 0 && runtime.NumGoroutine() <= base }) {
		t.Fatalf("%d idle workers and %d goroutines after keep, want 0 and at most %d", w.idle.Load(), runtime.NumGoroutine(), base)
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
