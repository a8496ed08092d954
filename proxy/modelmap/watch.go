package modelmap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/fileread"
)

// DefaultPollInterval is how often a Watcher looks at its file.
const DefaultPollInterval = 2 * time.Second

// DefaultSettle is how long a changed file must stay unchanged before it
// is applied (at most the poll interval).
const DefaultSettle = 100 * time.Millisecond

// Reload results, the values of the result label of
// tfsbridge_model_map_reloads_total.
const (
	ReloadSuccess = "success"
	ReloadFailure = "failure"
)

// Watcher holds the map in force and re-reads its file when it changes.
//
// It polls instead of using inotify: a Kubernetes ConfigMap volume
// updates by swapping a "..data" symlink, so the watched path itself
// never sees a write event, and polling also covers network and overlay
// filesystems. Each poll reads the file through its symlinks (never
// blocking on a FIFO, at most MaxFileBytes) and compares a content hash,
// which no coarse modification time or same-size rewrite can fool.
//
// A map is applied only when complete. The contract is that the file is
// replaced atomically (written aside and renamed over the path, or a
// symlink swapped, as the kubelet does); as a guard against a file
// written in place, a changed file is applied only when it is the same
// (bytes, size and modification time) across two reads Settle apart: a
// write caught half-way is looked at again at the next poll.
//
// A bad new file leaves the old map in force, is logged and counted
// once (not every poll), and Status reports it failing for as long as
// it stays.
type Watcher struct {
	path     string
	interval time.Duration
	settle   time.Duration
	log      *slog.Logger
	apply    func(*Map) error
	count    func(result string)
	report   func(Status)
	// pause waits between the two reads of a changed file; tests replace
	// it to change the file in that window.
	pause func(time.Duration)

	// mu serializes polls (Run's and Poll's callers, e.g. SIGHUP).
	// Request handling never takes it: it reads the map Apply installed.
	mu     sync.Mutex
	sum    [sha256.Size]byte // the map in force
	badSum [sha256.Size]byte // a bad file already reported
	status atomic.Pointer[Status]
	polls  atomic.Uint64
}

// Status is the state of a Watcher's map.
type Status struct {
	// Path is the map file.
	Path string
	// SHA256 is the hex SHA-256 of the content of the map in force
	// (what sha256sum prints for that file).
	SHA256 string
	// Models and Servers count the map in force (servers besides the
	// default one).
	Models, Servers int
	// LoadedAt is when the map in force was installed.
	LoadedAt time.Time
	// Err is why the file on disk cannot be loaded; nil when the file is
	// the map in force (or a change is still settling).
	Err error
	// Polls counts the polls done so far (not reported: Status only).
	Polls uint64
}

// Failing reports whether the file on disk fails to load.
func (s Status) Failing() bool { return s.Err != nil }

// WatcherConfig configures NewWatcher.
type WatcherConfig struct {
	// Path is the map file.
	Path string
	// Interval between polls; 0 means DefaultPollInterval.
	Interval time.Duration
	// Settle is how long a changed file must stay unchanged before it is
	// applied; 0 means DefaultSettle, at most Interval.
	Settle time.Duration
	// Logger receives loads (info) and failures (error).
	Logger *slog.Logger
	// Apply installs a map: called once by NewWatcher and after every
	// successful re-read. An error keeps the previous map in force.
	Apply func(*Map) error
	// Count, when set, is called with ReloadSuccess or ReloadFailure.
	Count func(result string)
	// Report, when set, is called with the new Status whenever it
	// changes, first by NewWatcher.
	Report func(Status)
}

// NewWatcher loads the file once and installs it with Apply; an error
// there (a bad file at startup) is returned and nothing is installed.
func NewWatcher(cfg WatcherConfig) (*Watcher, error) {
	w := &Watcher{path: cfg.Path, interval: cfg.Interval, settle: cfg.Settle, log: cfg.Logger,
		apply: cfg.Apply, count: cfg.Count, report: cfg.Report, pause: time.Sleep}
	if w.interval <= 0 {
		w.interval = DefaultPollInterval
	}
	if w.settle <= 0 {
		w.settle = min(DefaultSettle, w.interval)
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.count == nil {
		w.count = func(string) {}
	}
	if w.report == nil {
		w.report = func(Status) {}
	}
	data, err := readFile(w.path)
	if err != nil {
		return nil, err
	}
	m, err := Parse(data)
	if err == nil {
		err = w.apply(m)
	}
	if err != nil {
		return nil, errorIn(w.path, err)
	}
	w.installed(m, data)
	w.log.Info("model map loaded", w.logAttrs()...)
	return w, nil
}

func errorIn(path string, err error) error {
	return &pathError{path: path, err: err}
}

type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// Run polls until ctx is done. A poll never blocks (a FIFO or device is
// refused at once), so Run returns within one settle delay of ctx's end.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Poll()
		}
	}
}

// Poll checks the file once and reloads it when it changed. It returns
// whether a new map was installed. Run calls it; so may a signal handler
// that wants a reload now.
func (w *Watcher) Poll() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.polls.Add(1)
	data, err := readFile(w.path)
	if err != nil {
		// A ConfigMap swap can leave the path missing for an instant:
		// keep the old map and look again at the next poll.
		w.fail(err, [sha256.Size]byte{})
		return false
	}
	sum := sha256.Sum256(data)
	switch sum {
	case w.sum:
		// The file is the map in force (perhaps back after a bad version).
		w.badSum = [sha256.Size]byte{}
		w.setErr(nil)
		return false
	case w.badSum:
		return false // a bad file already reported
	}
	if !w.settled(data) {
		w.log.Debug("model map file is changing; looking again at the next poll", "file", w.path)
		return false
	}
	m, err := Parse(data)
	if err == nil {
		err = w.apply(m)
	}
	if err != nil {
		w.fail(errorIn(w.path, err), sum)
		return false
	}
	w.badSum = [sha256.Size]byte{}
	w.installed(m, data)
	w.count(ReloadSuccess)
	w.log.Info("model map reloaded", w.logAttrs()...)
	return true
}

// settled reports whether the file, read as data, is unchanged (bytes,
// size, modification time) a settle delay later: a file written in place
// is not applied half-written.
func (w *Watcher) settled(data []byte) bool {
	before, err := fileread.Stat(w.path)
	if err != nil {
		return false
	}
	w.pause(w.settle)
	again, err := readFile(w.path)
	if err != nil || !bytes.Equal(again, data) {
		return false
	}
	after, err := fileread.Stat(w.path)
	return err == nil && after.Size() == before.Size() && after.ModTime().Equal(before.ModTime())
}

// installed records m, read from data, as the map in force.
func (w *Watcher) installed(m *Map, data []byte) {
	w.sum = sha256.Sum256(data)
	w.set(Status{Path: w.path, SHA256: hex.EncodeToString(w.sum[:]), Models: len(m.Models),
		Servers: len(m.Servers), LoadedAt: time.Now()})
}

func (w *Watcher) fail(err error, sum [sha256.Size]byte) {
	if sum != ([sha256.Size]byte{}) {
		w.badSum = sum
	}
	if prev := w.Status().Err; prev != nil && prev.Error() == err.Error() {
		return // the same problem, still there
	}
	w.setErr(err)
	w.count(ReloadFailure)
	w.log.Error("model map reload failed; the previous map stays in force", "file", w.path, "error", err.Error())
}

func (w *Watcher) setErr(err error) {
	s := w.Status()
	if s.Err == nil && err == nil {
		return
	}
	s.Err = err
	w.set(s)
}

func (w *Watcher) set(s Status) {
	w.status.Store(&s)
	w.report(s)
}

func (w *Watcher) logAttrs() []any {
	s := w.Status()
	return []any{"file", s.Path, "models", s.Models, "servers", s.Servers, "sha256", s.SHA256}
}

// Status returns the state of the map in force and of the file on disk.
// It takes no lock a poll holds.
func (w *Watcher) Status() Status {
	s := Status{Path: w.path}
	if p := w.status.Load(); p != nil {
		s = *p
	}
	s.Polls = w.polls.Load()
	return s
}

// LastError returns why the file on disk cannot be loaded, nil when it
// is the map in force.
func (w *Watcher) LastError() error { return w.Status().Err }
