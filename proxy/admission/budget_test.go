package admission

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

func TestBudget(t *testing.T) {
	m := observe.NewMetrics()
	b := New(100, m)
	steps := []struct {
		reserve, release int64
		ok               bool
		inUse            int64
	}{
		{reserve: 60, ok: true, inUse: 60},
		{reserve: 41, ok: false, inUse: 60}, // one byte over
		{reserve: 40, ok: true, inUse: 100}, // exactly full
		{reserve: 1, ok: false, inUse: 100},
		{release: 60, inUse: 40},
		{reserve: 0, ok: true, inUse: 40}, // nothing to reserve
		{reserve: 101, ok: false, inUse: 40},
		{release: 40, inUse: 0},
	}
	for i, s := range steps {
		if s.release > 0 {
			b.Release(s.release)
		} else {
			err := b.Reserve(s.reserve)
			var ex *Exhausted
			if s.ok != (err == nil) || (err != nil && !errors.As(err, &ex)) {
				t.Errorf("step %d: Reserve(%d) = %v, want ok=%v", i, s.reserve, err, s.ok)
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
	if err := b.Reserve(101); err == nil || !strings.Contains(err.Error(), "more than the whole in-flight budget of 100 bytes") {
		t.Errorf("oversized reservation: %v", err)
	}

	var nilBudget *Budget
	if err := nilBudget.Reserve(math.MaxInt64); err != nil || nilBudget.Limit() != 0 || nilBudget.InUse() != 0 {
		t.Errorf("nil budget refused or reports: %v", err)
	}
	nilBudget.Release(1)
}

// Concurrent reservations never overshoot the budget.
func TestBudgetConcurrent(t *testing.T) {
	b := New(1000, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if b.Reserve(300) == nil {
					mu.Lock()
					peak = max(peak, b.InUse())
					mu.Unlock()
					b.Release(300)
				}
			}
		}()
	}
	wg.Wait()
	if peak > 1000 || b.InUse() != 0 {
		t.Errorf("peak %d, left %d; want ≤ 1000 and 0", peak, b.InUse())
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
		for _, n := range sizes {
			if err := b.Reserve(n); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range sizes {
			b.Release(n)
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
	if err := b.Reserve(150); err != nil { // a burst, still in progress
		t.Fatal(err)
	}
	cycle(10)
	expect("a busy budget", 0)
	b.Release(150)
	if err := b.Reserve(10); err != nil { // busy again before the delay passed
		t.Fatal(err)
	}
	expect("busy again within the delay", 0)
	b.Release(10)
	b.lastTrim = time.Time{}
	if err := b.Reserve(150); err != nil {
		t.Fatal(err)
	}
	b.Release(150)
	expect("the burst drained", 1)
	cycle(400)
	expect("a second burst within the interval", 0)
	b.lastTrim = time.Now().Add(-trimInterval)
	cycle(100, 100)
	expect("a burst after the interval", 1)
}
