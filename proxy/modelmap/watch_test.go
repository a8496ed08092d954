package modelmap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/fileread"
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
	status   Status // the last one reported
	rejectIf func(*Map) error
}

func (h *holder) report(s Status) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status = s
}

func (h *holder) reported() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.status
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

// fileDeadline bounds a read that must not block; generous because the
// machine running the tests may be busy, yet far below "blocks for good".
const fileDeadline = 20 * time.Second

// within fails the test when f does not return within fileDeadline.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(fileDeadline):
		t.Fatalf("%s blocked for %v", what, fileDeadline)
	}
}

// replace points path at target (a FIFO, a device, a file) atomically.
func replace(t *testing.T, path, target string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWatcherNonRegularFiles: a map path that is or becomes a FIFO or a
// device is refused at once, keeps the map in force, is counted and
// reported failing until a good file is back.
func TestWatcherNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("models:\n  a: {model: one}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "map.yaml")
	fifo := mkfifo(t)
	for _, target := range []string{fifo, "/dev/zero"} {
		replace(t, path, target)
		within(t, "NewWatcher on "+target, func() {
			_, err := NewWatcher(WatcherConfig{Path: path, Apply: func(*Map) error { return nil }})
			if !errors.Is(err, fileread.ErrNotRegular) {
				t.Errorf("start on %s: err = %v, want ErrNotRegular", target, err)
			}
		})
	}

	replace(t, path, good)
	h := &holder{counts: map[string]int{}}
	w, err := NewWatcher(WatcherConfig{Path: path, Apply: h.apply, Count: h.count, Report: h.report})
	if err != nil {
		t.Fatal(err)
	}
	w.pause = func(time.Duration) {}
	sum := h.reported().SHA256
	if len(sum) != 64 || h.reported().Failing() || h.reported().Models != 1 {
		t.Fatalf("status at start = %+v", h.reported())
	}
	for i, target := range []string{fifo, "/dev/zero"} {
		replace(t, path, target)
		within(t, "Poll on "+target, func() {
			if w.Poll() {
				t.Errorf("%s: a map was installed", target)
			}
		})
		st := h.reported()
		if !errors.Is(st.Err, fileread.ErrNotRegular) || !st.Failing() || st.SHA256 != sum || h.get(ReloadFailure) != i+1 {
			t.Errorf("%s: status %+v, failures %d", target, st, h.get(ReloadFailure))
		}
		if m := h.cur.Load().Model("a"); m == nil || m.Default.Model != "one" {
			t.Errorf("%s: the map in force changed", target)
		}
	}
	replace(t, path, good)
	if w.Poll() || h.reported().Failing() || h.reported().SHA256 != sum || w.LastError() != nil {
		t.Errorf("the good file back: status %+v", h.reported())
	}
}

// TestWatcherHalfWritten: a file written in place is applied only once it
// stays the same across two reads; a write caught half-way (valid YAML
// here: "a:" alone maps a to itself) is never applied.
func TestWatcherHalfWritten(t *testing.T) {
	const full = "servers:\n  s: {url: \"http://s:1\"}\nmodels:\n  a:\n    server: s\n    model: two\n"
	const half = "servers:\n  s: {url: \"http://s:1\"}\nmodels:\n  a:\n"
	for _, tc := range []struct {
		name string
		// during runs between the two reads of the changed file.
		during  func(t *testing.T, path string)
		applied bool
	}{
		{"unchanged: applied", func(*testing.T, string) {}, true},
		{"the rest written meanwhile", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString(full[len(half):]); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"rewritten with the same bytes", func(t *testing.T, path string) {
			later := time.Now().Add(time.Minute)
			if err := os.Chtimes(path, later, later); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "map.yaml")
			if err := os.WriteFile(path, []byte("models:\n  a: {model: one}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			h := &holder{counts: map[string]int{}}
			w, err := NewWatcher(WatcherConfig{Path: path, Apply: h.apply, Count: h.count, Report: h.report})
			if err != nil {
				t.Fatal(err)
			}
			var paused time.Duration
			w.pause = func(d time.Duration) { paused = d; tc.during(t, path) }
			if err := os.WriteFile(path, []byte(half), 0o644); err != nil { // in place
				t.Fatal(err)
			}
			got := w.Poll()
			m := h.cur.Load().Model("a")
			if paused != DefaultSettle {
				t.Errorf("paused %v, want %v", paused, DefaultSettle)
			}
			if got != tc.applied || (m.Default.Model == "one") == tc.applied {
				t.Fatalf("Poll = %v, model a → %q on %q", got, m.Default.Model, m.Server)
			}
			if !tc.applied {
				if h.get(ReloadFailure) != 0 || h.reported().Failing() {
					t.Errorf("a file being written counted as a failure: %+v", h.reported())
				}
				// Once the file stays put, the next poll applies it.
				w.pause = func(time.Duration) {}
				if !w.Poll() || h.get(ReloadSuccess) != 1 {
					t.Errorf("the settled file was not applied")
				}
			}
		})
	}
}

// TestWatcherRunStops: Run ends promptly when its context does, even
// while its path is a FIFO no one writes to.
func TestWatcherRunStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "map.yaml")
	if err := os.WriteFile(path, []byte("models: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := &holder{counts: map[string]int{}}
	w, err := NewWatcher(WatcherConfig{Path: path, Interval: time.Millisecond, Apply: h.apply, Count: h.count})
	if err != nil {
		t.Fatal(err)
	}
	replace(t, path, mkfifo(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	deadline := time.After(fileDeadline)
	for h.get(ReloadFailure) == 0 { // until the FIFO has been looked at
		select {
		case <-done:
			t.Fatal("Run returned early")
		case <-deadline:
			t.Fatal("Run never polled the FIFO")
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	within(t, "Run after cancel", func() { <-done })
}
