package modelmap

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// configMapDir lays out a directory as the kubelet does for a ConfigMap
// volume: map.yaml → ..data/map.yaml, ..data → ..<version>/. update swaps
// the ..data symlink atomically to a new version directory.
type configMapDir struct {
	t       *testing.T
	dir     string
	version int
}

func newConfigMapDir(t *testing.T, doc string) *configMapDir {
	c := &configMapDir{t: t, dir: t.TempDir()}
	c.update(doc)
	if err := os.Symlink(filepath.Join("..data", "map.yaml"), filepath.Join(c.dir, "map.yaml")); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *configMapDir) path() string { return filepath.Join(c.dir, "map.yaml") }

func (c *configMapDir) update(doc string) {
	c.version++
	ver := filepath.Join(c.dir, "..v"+string(rune('0'+c.version)))
	if err := os.Mkdir(ver, 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ver, "map.yaml"), []byte(doc), 0o644); err != nil {
		c.t.Fatal(err)
	}
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ver), tmp); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		c.t.Fatal(err)
	}
}

// holder is what a bridge does with Apply: keep the map in force.
type holder struct {
	cur      atomic.Pointer[Map]
	mu       sync.Mutex
	counts   map[string]int
	rejectIf func(*Map) error
}

func (h *holder) apply(m *Map) error {
	if h.rejectIf != nil {
		if err := h.rejectIf(m); err != nil {
			return err
		}
	}
	h.cur.Store(m)
	return nil
}

func (h *holder) count(r string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[r]++
}

func (h *holder) get(r string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[r]
}

func TestWatcherReload(t *testing.T) {
	cm := newConfigMapDir(t, "models:\n  a: {model: one}\n")
	h := &holder{counts: map[string]int{}}
	w, err := NewWatcher(WatcherConfig{Path: cm.path(), Apply: h.apply, Count: h.count})
	if err != nil {
		t.Fatal(err)
	}
	model := func() string {
		if m := h.cur.Load().Model("a"); m != nil {
			return m.Default.Model
		}
		return ""
	}
	steps := []struct {
		name      string
		doc       string // "" leaves the file alone
		installed bool
		model     string
		ok, fail  int
	}{
		{"unchanged", "", false, "one", 0, 0},
		{"good", "models:\n  a: {model: two}\n", true, "two", 1, 0},
		{"bad keeps the old map", "models:\n  a: {modle: three}\n", false, "two", 1, 1},
		{"the same bad file is counted once", "", false, "two", 1, 1},
		{"good again", "models:\n  a: {model: four}\n", true, "four", 2, 1},
		{"same content, new version directory", "models:\n  a: {model: four}\n", false, "four", 2, 1},
	}
	for _, st := range steps {
		if st.doc != "" {
			cm.update(st.doc)
		}
		if got := w.Poll(); got != st.installed || model() != st.model || h.get(ReloadSuccess) != st.ok || h.get(ReloadFailure) != st.fail {
			t.Errorf("%s: installed %v model %q counts %d/%d; want %v %q %d/%d", st.name, got, model(),
				h.get(ReloadSuccess), h.get(ReloadFailure), st.installed, st.model, st.ok, st.fail)
		}
	}
	var e *Error
	if err := w.LastError(); err != nil || errors.As(w.LastError(), &e) {
		t.Errorf("LastError after a good reload = %v", err)
	}

	// A map the bridge cannot install (Apply fails) keeps the old one.
	h.rejectIf = func(m *Map) error { return errors.New("server cannot be set up") }
	cm.update("models:\n  a: {model: five}\n")
	if w.Poll() || model() != "four" || h.get(ReloadFailure) != 2 {
		t.Errorf("rejected map installed: %q, failures %d", model(), h.get(ReloadFailure))
	}
	// The file vanishing for a moment (a swap in progress) keeps the map.
	h.rejectIf = nil
	if err := os.Remove(filepath.Join(cm.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if w.Poll() || model() != "four" {
		t.Errorf("missing file changed the map: %q", model())
	}
	cm.update("models:\n  a: {model: six}\n")
	if !w.Poll() || model() != "six" {
		t.Errorf("after the file came back: %q", model())
	}
}

func TestWatcherBadStart(t *testing.T) {
	p := filepath.Join(t.TempDir(), "map.yaml")
	if err := os.WriteFile(p, []byte("models:\n  a:\n    labels: {x: y}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	applied := false
	_, err := NewWatcher(WatcherConfig{Path: p, Apply: func(*Map) error { applied = true; return nil }})
	var e *Error
	if !errors.As(err, &e) || e.Line != 3 || applied {
		t.Errorf("err = %v (applied %v), want a line 3 *Error and nothing applied", err, applied)
	}
	if _, err := NewWatcher(WatcherConfig{Path: p + ".missing", Apply: func(*Map) error { return nil }}); err == nil {
		t.Error("a missing file at start was accepted")
	}
}

// TestWatcherConcurrent polls while readers use the map (run with -race).
func TestWatcherConcurrent(t *testing.T) {
	cm := newConfigMapDir(t, "models:\n  a: {model: m0}\n")
	h := &holder{counts: map[string]int{}}
	w, err := NewWatcher(WatcherConfig{Path: cm.path(), Interval: time.Millisecond, Apply: h.apply, Count: h.count})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if m := h.cur.Load().Model("a"); m == nil || m.Default.Model == "" {
					t.Error("a reader saw no map")
					return
				}
			}
		}()
	}
	for i := range 5 {
		doc := "models:\n  a: {model: m" + string(rune('1'+i)) + "}\n"
		if i%2 == 1 {
			doc = "models: [\n"
		}
		cm.update(doc)
		w.Poll()
	}
	close(done)
	wg.Wait()
	if h.get(ReloadSuccess) != 3 || h.get(ReloadFailure) != 2 {
		t.Errorf("counts %v, want 3 successes and 2 failures", h.counts)
	}
}
