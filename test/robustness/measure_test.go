package robustness

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/poll"
	"github.com/tfsbridge/tfsbridge/internal/racebuild"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// allocated runs f and returns the bytes the process allocated meanwhile
// (runtime.MemStats.TotalAlloc). f runs once beforehand, so lazily built
// tables do not count; two GCs before the measured run empty the pools
// (sync.Pool keeps a victim cache across one), so what they hand out is
// counted too and the bound is an upper one. The tests that call it do
// not run in parallel, so the process is quiet.
func allocated(f func()) uint64 {
	f()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// bound is an allocation budget: PerByte bytes per input byte plus Fixed.
type bound struct {
	PerByte float64
	Fixed   uint64
}

func (b bound) limit(input int) uint64 { return uint64(b.PerByte*float64(input)) + b.Fixed }

func (b bound) String() string { return fmt.Sprintf("%.1f×input + %d", b.PerByte, b.Fixed) }

// checkAlloc fails t when f allocates more than b allows for input bytes.
// Under -race it only runs f: the race runtime drops pooled objects at
// random and allocates for itself, so its counts say nothing about ours.
func checkAlloc(t *testing.T, input int, b bound, f func()) {
	t.Helper()
	if racebuild.Enabled {
		f()
		return
	}
	got := allocated(f)
	if lim := b.limit(input); got > lim {
		t.Errorf("allocated %d bytes for a %d-byte input (%.1f×), bound %s = %d", got, input, float64(got)/float64(max(input, 1)), b, lim)
	} else if testing.Verbose() {
		t.Logf("allocated %d bytes for a %d-byte input (%.2f×; bound %s)", got, input, float64(got)/float64(max(input, 1)), b)
	}
}

// wantAPIError checks that err is an *apierr.Error with the given HTTP
// status whose message starts with prefix.
func wantAPIError(t *testing.T, err error, status int, prefix string) {
	t.Helper()
	var e *apierr.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want an *apierr.Error", err, err)
	}
	if e.HTTPStatus() != status {
		t.Errorf("status = %d (%s: %.200q), want %d", e.HTTPStatus(), e.Code, e.Msg, status)
	}
	if len(e.Msg) < len(prefix) || e.Msg[:len(prefix)] != prefix {
		t.Errorf("message = %.300q, want it to start with %q", e.Msg, prefix)
	}
}

// settleTimeout bounds the waits for something that must happen soon
// (goroutines ending, memory being let go, a metric reaching its value).
// The waits poll for the event and return as soon as it happens; the bound
// only decides how long a broken run takes to fail, so it is generous: on a
// busy 2-core machine a goroutine can wait seconds for a CPU.
const settleTimeout = 30 * time.Second

// waitGoroutines polls until the process runs at most want goroutines, or
// fails t with a dump of them after the deadline. Each poll first calls
// kick (typically a stack's dropIdle): an HTTP client hands a connection
// back to its idle pool a moment after the caller read the answer, so one
// CloseIdleConnections right after the last request can miss it.
func waitGoroutines(t *testing.T, want int, deadline time.Duration, kick ...func()) {
	t.Helper()
	n := 0
	if !poll.Until(deadline, func() bool {
		for _, k := range kick {
			k()
		}
		n = runtime.NumGoroutine()
		return n <= want
	}) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%d goroutines still running after %v, want at most %d:\n%s", n, deadline, want, buf)
	}
}

// stableGoroutines returns the goroutine count once it has stayed the
// same for five polls in a row (calling kick before each, as
// waitGoroutines does), or after settleTimeout: a baseline without the
// goroutines of connections that are closing. A count taken too early only
// makes the baseline higher, never a check stricter.
func stableGoroutines(kick ...func()) int {
	n, same := runtime.NumGoroutine(), 0
	for end := time.Now().Add(settleTimeout); same < 5 && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
		for _, k := range kick {
			k()
		}
		if m := runtime.NumGoroutine(); m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC() // a second cycle frees what the first one's finalizers released
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// settledHeap polls heapInUse until it is at most limit or the deadline
// passes, and returns the last reading: server connections that a client
// just closed release their last request a moment later, and on a busy
// machine that moment can be long. Each poll first calls kick, as
// waitGoroutines does.
func settledHeap(limit uint64, deadline time.Duration, kick ...func()) uint64 {
	end := time.Now().Add(deadline)
	for {
		for _, k := range kick {
			k()
		}
		h := heapInUse()
		if h <= limit || time.Now().After(end) {
			return h
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// heapPeak runs f and returns the high-water mark of the heap's object
// bytes (live and not yet swept) above what it was before f, sampled every
// 50µs by another goroutine from runtime/metrics (which does not stop the
// world). It is what a body costs at its worst moment, the figure the
// admission factors must cover; allocated's TotalAlloc counts garbage that
// the collector recycled long before the peak. Sampling can miss a spike
// shorter than the period, so callers bound it with margin.
func heapPeak(f func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	runtime.GC()
	runtime.GC()
	base := read()
	stop := make(chan struct{})
	done := make(chan uint64)
	go func() {
		peak := base
		t := time.NewTicker(50 * time.Microsecond)
		defer t.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-stop:
				done <- max(peak, read())
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	peak := <-done
	return peak - min(peak, base)
}
