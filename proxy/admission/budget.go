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
	"sync"

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
)

// Budget is the shared reservation counter. A nil *Budget admits
// everything.
type Budget struct {
	limit   int64
	metrics *observe.Metrics

	mu   sync.Mutex
	used int64
}

// New returns a budget of limit bytes (limit must be positive) that
// reports its level and refusals to m.
func New(limit int64, m *observe.Metrics) *Budget {
	return &Budget{limit: limit, metrics: m}
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
	used := b.used
	b.mu.Unlock()
	b.metrics.InflightBytes(used)
}

// Release returns n reserved bytes.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	used := b.used
	b.mu.Unlock()
	b.metrics.InflightBytes(used)
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
