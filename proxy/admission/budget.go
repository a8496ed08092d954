// Package admission bounds the memory that all exchanges in progress may
// hold together. Each translated exchange reserves, when a body arrives,
// the body's size times the amplification factor its translation may
// reach at its peak, and releases everything when it ends; a reservation
// that would take the total over the budget is refused, and the session
// answers TF's 503 instead of translating. Limits per exchange
// (--max-body-bytes, the expansion budgets of the translators) keep one
// exchange within its factor; this package keeps their sum within
// --max-inflight-bytes, so that a burst of large requests queues at the
// client rather than ending in an out-of-memory kill.
package admission

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// Amplification factors: the bytes one exchange may hold at its peak per
// byte of a body. test/robustness (TestMemoryAmplification) measures the
// worst bodies against them: the translations peak at about 16× and 25×,
// and the adapters hold a copy or two of the bodies besides (gRPC message
// buffers, the proxy's read buffer).
const (
	// RequestFactor covers a TF request body while it is translated: the
	// body, the parse tape (24 bytes per JSON value, so 12 per byte of
	// "0,0,…") and the v2 body built from it (8 bytes per such value for
	// INT64 or FP64).
	RequestFactor = 20
	// ResponseFactor covers a v2 response body while it is translated:
	// the body, the parse tape of a JSON one, the decoded tensors and the
	// TF JSON written from them (started at half its size bound). An
	// answer that expands further is held in full once written (Hold).
	ResponseFactor = 32
	// StreamFactor covers a TF request body parsed as it streams in
	// (full-duplex ext_proc, the reverse proxy): the text is never held,
	// only the tensors it fills and the v2 body's header, about the
	// body's size for floats. A body whose tensors outgrow it (INT64 from
	// one-digit numbers) holds the difference once translated.
	StreamFactor = 2
)

// Budget is the shared reservation counter. A nil *Budget admits
// everything.
type Budget struct {
	limit   int64
	metrics *observe.Metrics

	mu   sync.Mutex
	used int64
	// peak is the highest total since the budget last drained; a drain
	// after a large peak returns the burst's memory to the OS.
	peak int64
	// trim returns memory to the OS; lastTrim rate-limits it.
	trim     func()
	lastTrim time.Time
}

// Trimming: when the reserved total falls back to zero after a burst that
// reserved at least 1/trimShare of the budget, and is still zero trimDelay
// later (the exchanges' last buffers are unreferenced by then), the
// burst's memory is returned to the OS (debug.FreeOSMemory, on a timer's
// goroutine), at most once per trimInterval. Without it the heap stays at
// the burst's size until the next collection, which an idle process runs
// only every two minutes; with it an idle tfsbridge shrinks back within a
// second. It never runs on a busy process nor after small exchanges.
const (
	trimShare    = 8
	trimDelay    = 200 * time.Millisecond
	trimInterval = 10 * time.Second
)

// New returns a budget of limit bytes (limit must be positive) that
// reports its level and refusals to m.
func New(limit int64, m *observe.Metrics) *Budget {
	return &Budget{limit: limit, metrics: m, trim: trim}
}

// Limit returns the budget's size; 0 for a nil budget.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// InUse returns the bytes reserved now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Reserve reserves n more bytes, or returns an *Exhausted error and
// reserves nothing when the total would exceed the budget. n ≤ 0 always
// succeeds.
func (b *Budget) Reserve(n int64) error {
	if b == nil || n <= 0 {
		return nil
	}
	b.mu.Lock()
	if b.used > b.limit-n {
		used := b.used
		b.mu.Unlock()
		b.metrics.AdmissionRejected()
		return &Exhausted{Need: n, InUse: used, Limit: b.limit}
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	used := b.used
	b.mu.Unlock()
	b.metrics.InflightBytes(used)
	return nil
}

// Hold adds n bytes to the total even over the budget: for memory an
// exchange already holds (a translated answer larger than its
// reservation, waiting for a slow client), which new requests must see.
func (b *Budget) Hold(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used += n
	b.peak = max(b.peak, b.used)
	used := b.used
	b.mu.Unlock()
	b.metrics.InflightBytes(used)
}

// trim returns the heap to the OS: two collections, since pooled buffers
// (the translators keep parse tapes and output buffers of up to 64 MiB for
// reuse) survive the first, then debug.FreeOSMemory.
func trim() {
	runtime.GC()
	debug.FreeOSMemory()
}

// Release returns n reserved bytes.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	used := b.used
	trim := false
	if used == 0 {
		now := time.Now()
		trim = b.peak >= b.limit/trimShare && now.Sub(b.lastTrim) >= trimInterval
		if trim {
			b.lastTrim = now
		}
		b.peak = 0
	}
	b.mu.Unlock()
	b.metrics.InflightBytes(used)
	if trim && b.trim != nil {
		time.AfterFunc(trimDelay, func() {
			if b.InUse() == 0 {
				b.trim()
			}
		})
	}
}

// Exhausted is a refused reservation.
type Exhausted struct {
	Need, InUse, Limit int64
}

// Error implements error.
func (e *Exhausted) Error() string {
	if e.Need > e.Limit {
		return fmt.Sprintf("needs %d bytes of working memory, more than the whole in-flight budget of %d bytes", e.Need, e.Limit)
	}
	return fmt.Sprintf("needs %d bytes of working memory and %d of the in-flight budget of %d bytes are in use", e.Need, e.InUse, e.Limit)
}
