package admission

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/poll"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

func TestBudget(t *testing.T) {
	m := observe.NewMetrics()
	b := New(100, m)
	ctx := context.Background()
	r1, r2 := b.Open(), b.Open()
	steps := []struct {
		r       *Reservation
		grow    int64
		release bool
		ok      bool
		inUse   int64
	}{
		{r: r1, grow: 60, ok: true, inUse: 60},
		{r: r2, grow: 41, ok: false, inUse: 60}, // one byte over: a newcomer does not wait
		{r: r2, grow: 40, ok: true, inUse: 100}, // exactly full
		{r: r1, grow: 0, ok: true, inUse: 100},  // nothing to reserve
		{r: r1, release: true, inUse: 40},
		{r: r1, grow: 1, ok: false, inUse: 40},  // released: refused
		{r: r1, release: true, inUse: 40},       // idempotent
		{r: r2, grow: 61, ok: false, inUse: 40}, // 101 in all: never fits
		{r: r2, release: true, inUse: 0},
	}
	for i, s := range steps {
		if s.release {
			s.r.Release()
		} else {
			err := s.r.Grow(ctx, s.grow)
			var ex *Exhausted
			if s.ok != (err == nil) || (err != nil && !errors.As(err, &ex)) {
				t.Errorf("step %d: Grow(%d) = %v, want ok=%v", i, s.grow, err, s.ok)
			}
		}
		if got := b.InUse(); got != s.inUse {
			t.Errorf("step %d: in use %d, want %d", i, got, s.inUse)
		}
		if got := m.Value("tfsbridge_inflight_bytes"); got != float64(s.inUse) {
			t.Errorf("step %d: gauge %v, want %d", i, got, s.inUse)
		}
	}
	if got := m.Value("tfsbridge_admission_rejections_total"); got != 3 {
		t.Errorf("rejections = %v, want 3", got)
	}
	if err := b.Open().Grow(ctx, 101); err == nil || !strings.Contains(err.Error(), "needs 101 bytes of working memory, more than the whole in-flight budget of 100 bytes") {
		t.Errorf("oversized reservation: %v", err)
	}
	r := b.Open()
	r.Hold(150) // over the budget: held anyway
	if got := b.InUse(); got != 150 || r.Held() != 150 {
		t.Errorf("held %d (%d in use), want 150", r.Held(), got)
	}
	r.Release()

	var nilBudget *Budget
	nr := nilBudget.Open()
	if err := nr.Grow(ctx, math.MaxInt64); err != nil || nilBudget.Limit() != 0 || nilBudget.InUse() != 0 || nr.Held() != 0 || nr.Wounded() != nil {
		t.Errorf("nil budget refused or reports: %v", err)
	}
	nr.Hold(1)
	nr.Release()
}

// waitFor polls cond: the budget's waiters block in other goroutines,
// and this is how the test sees they got there. The deadline only bounds
// a broken build.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll.Until(30*time.Second, cond) {
		t.Fatalf("timed out waiting until %s", what)
	}
}

func (b *Budget) waiters() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting
}

// growAsync runs r.Grow in a goroutine; its result arrives on the channel.
func growAsync(ctx context.Context, r *Reservation, n int64) <-chan error {
	c := make(chan error, 1)
	go func() { c <- r.Grow(ctx, n) }()
	return c
}

func isWounded(err error) bool {
	var ex *Exhausted
	return errors.As(err, &ex) && ex.Wounded
}

// The age rules: a holder waits for room, in age order; a newcomer never
// waits and never overtakes a waiter; the oldest waiter wounds the
// youngest holders until it fits.
func TestBudgetAgePriority(t *testing.T) {
	ctx := context.Background()
	t.Run("a holder waits for room", func(t *testing.T) {
		b := New(100, nil)
		a, c := b.Open(), b.Open()
		must(t, a.Grow(ctx, 60))
		must(t, c.Grow(ctx, 40))
		// c is younger than a: it waits instead of wounding a.
		got := growAsync(ctx, c, 10)
		waitFor(t, "c waits", func() bool { return b.waiters() == 1 })
		// A newcomer does not overtake the waiter, even when it fits.
		n := b.Open()
		a.Release()
		if err := <-got; err != nil {
			t.Fatalf("c after a released: %v", err)
		}
		if err := n.Grow(ctx, 10); err != nil {
			t.Fatalf("newcomer with room: %v", err)
		}
		if b.InUse() != 60 {
			t.Errorf("in use %d, want 60", b.InUse())
		}
	})
	t.Run("a newcomer does not overtake a waiter", func(t *testing.T) {
		b := New(100, nil)
		a, c := b.Open(), b.Open()
		must(t, a.Grow(ctx, 50))
		must(t, c.Grow(ctx, 30))
		got := growAsync(ctx, c, 30) // 110: waits for a
		waitFor(t, "c waits", func() bool { return b.waiters() == 1 })
		if err := b.Open().Grow(ctx, 10); err == nil {
			t.Error("a newcomer took room an older exchange waits for")
		}
		// An older holder's growth that fits goes first: it is older
		// than the waiter.
		must(t, a.Grow(ctx, 10))
		a.Release()
		if err := <-got; err != nil {
			t.Fatalf("c: %v", err)
		}
		c.Release()
	})
	t.Run("the oldest wounds the youngest", func(t *testing.T) {
		b := New(100, nil)
		r := []*Reservation{b.Open(), b.Open(), b.Open(), b.Open()}
		for _, x := range r {
			must(t, x.Grow(ctx, 25)) // full: ages 0..3
		}
		w3 := r[3].Wounded()
		// OnWound tells the same without a channel: r3's callback runs,
		// r1's (never wounded) does not, and one set after the wound runs
		// at once.
		on3, on1, late := make(chan struct{}), make(chan struct{}), make(chan struct{})
		r[3].OnWound(func() { close(on3) })
		r[1].OnWound(func() { close(on1) })
		// r[2] waits; then the oldest needs 30 more: r[3] (youngest) and r[2] are wounded.
		got2 := growAsync(ctx, r[2], 5)
		waitFor(t, "r2 waits", func() bool { return b.waiters() == 1 })
		got0 := growAsync(ctx, r[0], 30)
		if err := <-got2; !isWounded(err) {
			t.Errorf("r2 (waiting, wounded): %v, want a wound", err)
		}
		select {
		case <-w3:
		case <-time.After(30 * time.Second):
			t.Fatal("r3 not told it is wounded")
		}
		r[2].OnWound(func() { close(late) }) // r2 is wounded already
		for _, ch := range []chan struct{}{on3, late} {
			select {
			case <-ch:
			case <-time.After(30 * time.Second): // generous: a busy 2-core machine
				t.Fatal("an OnWound of a wounded reservation did not run")
			}
		}
		if err := r[3].Grow(ctx, 1); !isWounded(err) {
			t.Errorf("r3's next growth: %v, want a wound", err)
		}
		if r[1].wounded {
			t.Error("r1 wounded: the two youngest make room enough")
		}
		r[1].OnWound(nil)
		select {
		case <-on1:
			t.Error("r1's OnWound ran: it was never wounded")
		default:
		}
		r[2].Release()
		select {
		case err := <-got0:
			t.Fatalf("r0 granted before r3 gave back: %v", err)
		default:
		}
		r[3].Release()
		if err := <-got0; err != nil {
			t.Fatalf("r0: %v", err)
		}
		if got := b.InUse(); got != 80 {
			t.Errorf("in use %d, want 80", got)
		}
		r[0].Release()
		r[1].Release()
		if got := b.InUse(); got != 0 {
			t.Errorf("in use %d after all released", got)
		}
	})
	t.Run("a wait ends at its deadline", func(t *testing.T) {
		b := New(100, nil)
		a, c := b.Open(), b.Open()
		must(t, a.Grow(ctx, 50))
		must(t, c.Grow(ctx, 50))
		dctx, cancel := context.WithCancel(ctx)
		got := growAsync(dctx, c, 1)
		waitFor(t, "c waits", func() bool { return b.waiters() == 1 })
		cancel()
		var ex *Exhausted
		if err := <-got; !errors.As(err, &ex) || !ex.Waited || !strings.Contains(err.Error(), "until its deadline") {
			t.Errorf("c: %v, want a refusal after waiting", err)
		}
		if b.waiters() != 0 || b.InUse() != 100 {
			t.Errorf("%d waiters, %d in use", b.waiters(), b.InUse())
		}
	})
	t.Run("a release refuses its own wait", func(t *testing.T) {
		b := New(100, nil)
		a, c := b.Open(), b.Open()
		must(t, a.Grow(ctx, 50))
		must(t, c.Grow(ctx, 50))
		got := growAsync(ctx, c, 1)
		waitFor(t, "c waits", func() bool { return b.waiters() == 1 })
		c.Release() // a watchdog gives up on the exchange
		if err := <-got; err == nil {
			t.Error("a released reservation grew")
		}
		if b.InUse() != 50 {
			t.Errorf("in use %d, want 50", b.InUse())
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Concurrent exchanges that grow in random steps to random sizes never
// take the total over the budget, at least as many complete as fit in it
// at once, and everything is returned.
func TestBudgetConcurrent(t *testing.T) {
	const limit, exchanges = 1000, 64
	for round := range 20 {
		b := New(limit, nil)
		var wg sync.WaitGroup
		var mu sync.Mutex
		peak, done, maxSize := int64(0), 0, int64(0)
		rng := rand.New(rand.NewPCG(uint64(round), 1))
		sizes := make([]int64, exchanges)
		for i := range sizes {
			sizes[i] = 100 + rng.Int64N(200)
			maxSize = max(maxSize, sizes[i])
		}
		for i := range exchanges {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := b.Open()
				defer r.Release()
				for got := int64(0); got < sizes[i]; {
					step := min(sizes[i]-got, 1+int64(i*7+int(got))%40)
					if r.Grow(context.Background(), step) != nil {
						return
					}
					got += step
					mu.Lock()
					peak = max(peak, b.InUse())
					mu.Unlock()
					runtime.Gosched()
				}
				mu.Lock()
				done++
				mu.Unlock()
			}()
		}
		wg.Wait()
		if peak > limit || b.InUse() != 0 || b.waiters() != 0 || len(b.holders) != 0 {
			t.Fatalf("round %d: peak %d, left %d (%d waiters, %d holders); want ≤ %d and none", round, peak, b.InUse(), b.waiters(), len(b.holders), limit)
		}
		if want := int(limit / maxSize); done < want {
			t.Errorf("round %d: %d of %d exchanges completed, want at least %d", round, done, exchanges, want)
		}
	}
}

func TestCgroupLimit(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		content string
		want    int64
	}{
		{"536870912\n", 512 << 20},
		{"max\n", 0},
		{"", 0},
		{"-1", 0},
		{"lots", 0},
	} {
		p := filepath.Join(dir, "memory.max")
		if err := os.WriteFile(p, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := CgroupLimit(p); got != c.want {
			t.Errorf("CgroupLimit(%q) = %d, want %d", c.content, got, c.want)
		}
	}
	if got := CgroupLimit(filepath.Join(dir, "absent")); got != 0 {
		t.Errorf("missing file: %d", got)
	}
}

func TestSetSoftMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	p := filepath.Join(t.TempDir(), "memory.max")
	if err := os.WriteFile(p, []byte("1073741824\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) (string, bool) { return "", false }
	withEnv := func(k string) (string, bool) { return "512MiB", k == "GOMEMLIMIT" }

	debug.SetMemoryLimit(math.MaxInt64)
	if got, set := SetSoftMemoryLimit(withEnv, p); set || got != 0 {
		t.Errorf("GOMEMLIMIT set: limit %d, set %v; want the runtime's own (none here), untouched", got, set)
	}
	if got, set := SetSoftMemoryLimit(noEnv, filepath.Join(t.TempDir(), "absent")); set || got != 0 {
		t.Errorf("no cgroup: limit %d, set %v", got, set)
	}
	if got := DefaultLimit(); got != FallbackLimit {
		t.Errorf("DefaultLimit without a memory limit = %d, want %d", got, FallbackLimit)
	}
	got, set := SetSoftMemoryLimit(noEnv, p)
	gib := float64(1 << 30)
	if want := int64(gib * softLimitShare); !set || got != want {
		t.Errorf("cgroup 1GiB: limit %d, set %v; want %d, true", got, set, want)
	}
	if got, want := DefaultLimit(), int64(float64(int64(gib*softLimitShare))*budgetShare); got != want {
		t.Errorf("DefaultLimit = %d, want half the soft limit %d", got, want)
	}
}

// A drain after a burst of at least an eighth of the budget returns memory
// to the OS once; small exchanges, a busy budget and a second burst within
// the interval do not.
func TestBudgetTrimsAfterBursts(t *testing.T) {
	trims := make(chan struct{}, 8)
	b := New(800, nil)
	b.trim = func() { trims <- struct{}{} }
	cycle := func(sizes ...int64) {
		var rs []*Reservation
		for _, n := range sizes {
			r := b.Open()
			if err := r.Grow(context.Background(), n); err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		for _, r := range rs {
			r.Release()
		}
	}
	expect := func(what string, want int) {
		t.Helper()
		got := 0
		for {
			select {
			case <-trims:
				got++
				continue
			case <-time.After(trimDelay + 100*time.Millisecond):
			}
			break
		}
		if got != want {
			t.Errorf("%s: %d trims, want %d", what, got, want)
		}
	}
	cycle(10, 20, 30)
	expect("small exchanges", 0)
	burst := b.Open()
	must(t, burst.Grow(context.Background(), 150)) // a burst, still in progress
	cycle(10)
	expect("a busy budget", 0)
	burst.Release()
	again := b.Open()
	must(t, again.Grow(context.Background(), 10)) // busy again before the delay passed
	expect("busy again within the delay", 0)
	again.Release()
	b.lastTrim = time.Time{}
	cycle(150)
	expect("the burst drained", 1)
	cycle(400)
	expect("a second burst within the interval", 0)
	b.lastTrim = time.Now().Add(-trimInterval)
	cycle(100, 100)
	expect("a burst after the interval", 1)
}
