// Package admission bounds the memory that all exchanges in progress may
// hold together. Each translated exchange owns one Reservation: it grows
// as the exchange's bodies really arrive (bytes received times the
// amplification factor their translation may reach at its peak) and is
// released once, where the exchange ends. A growth that would take the
// total over the budget is refused, and the session answers TF's 503
// instead of translating. Limits per exchange (--max-body-bytes, the
// expansion budgets of the translators) keep one exchange within its
// factor; this package keeps their sum within --max-inflight-bytes, so
// that a burst of large requests queues at the client rather than ending
// in an out-of-memory kill.
//
// # Progress: age priority (wound-wait)
//
// Reservations are ordered by age, the moment they first held budget.
// The rules, which guarantee that a full budget never deadlocks and that
// the oldest exchange always progresses:
//
//   - A newcomer (a reservation that holds nothing yet) is admitted only
//     if its first growth fits and no older exchange waits; otherwise it
//     is refused at once (503). It never waits and never takes budget an
//     admitted exchange waits for.
//   - An admitted exchange whose growth does not fit waits, in age order,
//     up to its deadline (the body timeout, the write timeout): budget
//     freed goes to the oldest waiter first, and no younger exchange may
//     grow while an older one waits.
//   - The oldest waiter wounds younger holders, youngest first, until
//     what they hold would make room for it: a wounded waiter is refused
//     at once, a wounded exchange that is not waiting is told (Wounded)
//     and refused at its next growth. Each refusal answers 503 and
//     releases everything, so the oldest gets its room.
//
// Hence the k oldest exchanges, where k is how many fit in the budget
// together at their peak, are never wounded and all complete; a body
// that never arrives holds only what did arrive.
package admission

import (
	"context"
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
	// body, what it is read into (the parse tape of a classify or regress
	// body, 24 bytes per JSON value, so 12 per byte of "0,0,…"; a predict
	// body's decoder fills the tensors directly) and the v2 body built from
	// it (8 bytes per such value for INT64 or FP64).
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
	// StringStreamFactor replaces StreamFactor for a body that may hold
	// strings (a signature with a BYTES input, or one not known before
	// the body names it): the streaming decoder keeps a long string (b64)
	// in its pending text and an instance's dump besides, ~8× its size.
	StringStreamFactor = 10
	// QuoteCost is added for every '"' of such a body: each string is
	// kept as a slice (24 bytes of header, grown by doubling, and 4 bytes
	// of v2 length), which for `"",` is ~30× the text. Counting quotes is
	// cheap and bounds it whatever the strings' lengths.
	// test/robustness (TestReservationCoversHeap) measures the worst
	// shapes against both.
	QuoteCost = 40
)

// Budget is the shared reservation counter. A nil *Budget admits
// everything.
type Budget struct {
	limit   int64
	metrics *observe.Metrics

	mu   sync.Mutex
	used int64
	// holders are the reservations that hold budget or wait for it, in
	// age order (oldest first); waiting counts those waiting.
	holders []*Reservation
	waiting int
	// age is the age given to the next reservation to first hold.
	age uint64
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

// Open returns a new, empty reservation for one exchange; nil (which
// admits everything) for a nil budget. Its owner must Release it when the
// exchange ends.
func (b *Budget) Open() *Reservation {
	if b == nil {
		return nil
	}
	return &Reservation{b: b}
}

// Reservation is one exchange's share of a Budget. Grow and Hold are for
// its owner, one call at a time; Release, Held and Wounded are safe from
// any goroutine (a watchdog may release an exchange its owner is stuck
// in). All methods of a nil *Reservation succeed and hold nothing.
type Reservation struct {
	b *Budget

	// Guarded by b.mu.
	held     int64
	age      uint64
	holding  bool  // in b.holders
	want     int64 // > 0 while waiting in Grow
	wake     chan error
	wounded  bool
	woundCh  chan struct{} // closed when wounded
	onWound  func()        // run in a goroutine of its own when wounded (OnWound)
	released bool
}

// Held returns the bytes the reservation holds.
func (r *Reservation) Held() int64 {
	if r == nil {
		return 0
	}
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	return r.held
}

// Wounded returns a channel closed when an older exchange needs what this
// one holds: its next Grow is refused, and an owner that can end the
// exchange sooner (a client trickling its body) should. A nil reservation
// returns a nil channel (never ready).
func (r *Reservation) Wounded() <-chan struct{} {
	if r == nil {
		return nil
	}
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	if r.woundCh == nil {
		r.woundCh = make(chan struct{})
		if r.wounded {
			close(r.woundCh)
		}
	}
	return r.woundCh
}

// OnWound has f run, in a goroutine of its own, when the reservation is
// wounded (at once if it already is); nil clears it, and a later call
// replaces an earlier f. It is Wounded for an owner that would otherwise
// start a goroutine per exchange only to wait on the channel: nothing
// runs unless the wound comes. An f already started may still be running
// when OnWound(nil) returns. A nil reservation ignores it.
func (r *Reservation) OnWound(f func()) {
	if r == nil {
		return
	}
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	r.onWound = f
	if f != nil && r.wounded {
		go f()
	}
}

// Grow reserves n more bytes, or returns an *Exhausted error and reserves
// nothing. It follows the package's age rules: a growth that does not fit
// may wait until ctx is done, but only for a reservation that already
// holds budget. n ≤ 0 always succeeds.
func (r *Reservation) Grow(ctx context.Context, n int64) error {
	if r == nil || n <= 0 {
		return nil
	}
	b := r.b
	b.mu.Lock()
	if err := r.refusal(n); err != nil {
		b.mu.Unlock()
		return b.refused(err)
	}
	if b.used+n <= b.limit && !b.olderWaiting(r) {
		r.take(n)
		used := b.used
		b.mu.Unlock()
		b.metrics.InflightBytes(used)
		return nil
	}
	if !r.holding {
		// A newcomer does not queue: the client retries later.
		err := &Exhausted{Need: n, InUse: b.used, Limit: b.limit}
		b.mu.Unlock()
		return b.refused(err)
	}
	r.want, r.wake = n, make(chan error, 1)
	b.waiting++
	wake := r.wake
	b.settle()
	b.mu.Unlock()
	select {
	case err := <-wake:
		return b.woken(err)
	case <-ctx.Done():
	}
	b.mu.Lock()
	if r.want == 0 {
		// Granted or refused meanwhile.
		b.mu.Unlock()
		return b.woken(<-wake)
	}
	r.stopWaiting()
	err := &Exhausted{Need: r.held + n, InUse: b.used, Limit: b.limit, Waited: true}
	b.settle() // younger waiters may fit now
	b.mu.Unlock()
	return b.refused(err)
}

// woken reports the outcome of a wait.
func (b *Budget) woken(err error) error {
	if err != nil {
		return b.refused(err)
	}
	b.metrics.InflightBytes(b.InUse())
	return nil
}

// refused counts a refusal.
func (b *Budget) refused(err error) error {
	b.metrics.AdmissionRejected()
	return err
}

// refusal is the error of a growth refused whatever the others hold.
func (r *Reservation) refusal(n int64) error {
	b := r.b
	switch {
	case r.released:
		return &Exhausted{Need: r.held + n, InUse: b.used, Limit: b.limit, Wounded: r.wounded}
	case r.wounded:
		return &Exhausted{Need: r.held + n, InUse: b.used, Limit: b.limit, Wounded: true}
	case r.held+n > b.limit:
		return &Exhausted{Need: r.held + n, InUse: b.used, Limit: b.limit}
	}
	return nil
}

// olderWaiting reports a reservation older than r waiting in Grow; a
// newcomer (not holding yet) is younger than every holder (b.mu held).
func (b *Budget) olderWaiting(r *Reservation) bool {
	if b.waiting == 0 {
		return false
	}
	for _, h := range b.holders {
		if h == r {
			return false
		}
		if h.want > 0 {
			return true
		}
	}
	return true // r is a newcomer: every waiter is older
}

// take adds n to r's share (b.mu held).
func (r *Reservation) take(n int64) {
	b := r.b
	if !r.holding {
		r.holding = true
		r.age = b.age
		b.age++
		b.holders = append(b.holders, r)
	}
	r.held += n
	b.used += n
	b.peak = max(b.peak, b.used)
}

// stopWaiting ends r's wait (b.mu held).
func (r *Reservation) stopWaiting() {
	r.want = 0
	r.b.waiting--
}

// settle grants waiters that fit, oldest first and never past one that
// does not, then makes the oldest waiter that still does not fit room by
// wounding younger holders, youngest first (b.mu held).
func (b *Budget) settle() {
	var oldest *Reservation
	for _, h := range b.holders {
		if h.want == 0 {
			continue
		}
		if b.used+h.want > b.limit {
			oldest = h
			break
		}
		n := h.want
		h.stopWaiting()
		h.take(n)
		h.wake <- nil
	}
	if oldest == nil {
		return
	}
	// What will be free once every wounded holder has given its share back.
	free := b.limit - b.used
	for _, h := range b.holders {
		if h.wounded {
			free += h.held
		}
	}
	for i := len(b.holders) - 1; i >= 0 && free < oldest.want; i-- {
		h := b.holders[i]
		if h == oldest {
			break
		}
		if !h.wounded {
			free += h.held
			h.wound()
		}
	}
}

// wound marks r to give way (b.mu held): a waiting r is refused now.
func (r *Reservation) wound() {
	r.wounded = true
	if r.woundCh != nil {
		close(r.woundCh)
	}
	if r.onWound != nil {
		go r.onWound()
	}
	if r.want > 0 {
		n := r.want
		r.stopWaiting()
		r.wake <- &Exhausted{Need: r.held + n, InUse: r.b.used, Limit: r.b.limit, Wounded: true}
	}
}

// Hold adds n bytes to the reservation even over the budget: for memory
// the exchange already holds (a translated answer larger than its
// reservation, waiting for a slow client), which new requests must see.
func (r *Reservation) Hold(n int64) {
	if r == nil || n <= 0 {
		return
	}
	b := r.b
	b.mu.Lock()
	if r.released {
		b.mu.Unlock()
		return
	}
	r.take(n)
	used := b.used
	b.mu.Unlock()
	b.metrics.InflightBytes(used)
}

// Release returns everything the reservation holds, once: later calls,
// and later growth, do nothing but refuse. A Grow waiting meanwhile (its
// owner's watchdog gave up on it) is refused.
func (r *Reservation) Release() {
	if r == nil {
		return
	}
	b := r.b
	b.mu.Lock()
	if r.released {
		b.mu.Unlock()
		return
	}
	r.released = true
	if r.want > 0 {
		n := r.want
		r.stopWaiting()
		r.wake <- &Exhausted{Need: r.held + n, InUse: b.used, Limit: b.limit}
	}
	if r.holding {
		r.holding = false
		for i, h := range b.holders {
			if h == r {
				b.holders = append(b.holders[:i], b.holders[i+1:]...)
				break
			}
		}
	}
	b.used -= r.held
	r.held = 0
	used := b.used
	b.settle()
	trim := false
	if b.used == 0 {
		now := time.Now()
		trim = b.peak >= b.limit/trimShare && now.Sub(b.lastTrim) >= trimInterval
		if trim {
			b.lastTrim = now
		}
		b.peak = 0
	}
	if b.used != used {
		used = b.used
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

// trim returns the heap to the OS: two collections, since pooled buffers
// (the translators keep parse tapes and output buffers of up to 64 MiB for
// reuse) survive the first, then debug.FreeOSMemory.
func trim() {
	runtime.GC()
	debug.FreeOSMemory()
}

// Exhausted is a refused growth: Need is what the exchange would hold
// with it.
type Exhausted struct {
	Need, InUse, Limit int64
	// Wounded: older exchanges need what this one holds (or would take).
	Wounded bool
	// Waited: it waited for room until its deadline.
	Waited bool
}

// Error implements error.
func (e *Exhausted) Error() string {
	switch {
	case e.Need > e.Limit:
		return fmt.Sprintf("needs %d bytes of working memory, more than the whole in-flight budget of %d bytes", e.Need, e.Limit)
	case e.Wounded:
		return fmt.Sprintf("needs %d bytes of working memory and older requests need the rest of the in-flight budget of %d bytes", e.Need, e.Limit)
	case e.Waited:
		return fmt.Sprintf("needs %d bytes of working memory and %d of the in-flight budget of %d bytes stayed in use until its deadline", e.Need, e.InUse, e.Limit)
	}
	return fmt.Sprintf("needs %d bytes of working memory and %d of the in-flight budget of %d bytes are in use", e.Need, e.InUse, e.Limit)
}

// Fits returns an *Exhausted error (and counts a refusal) when n bytes
// could never be reserved, being more than the whole budget; it reserves
// nothing. A nil budget fits everything.
func (b *Budget) Fits(n int64) error {
	if b == nil || n <= b.limit {
		return nil
	}
	return b.refused(&Exhausted{Need: n, InUse: b.InUse(), Limit: b.limit})
}
