package modelmap

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"sync"
	"time"
)

// DefaultPollInterval is how often a Watcher looks at its file.
const DefaultPollInterval = 2 * time.Second

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
// filesystems. Each poll reads the file through its symlinks (a map is a
// few KiB, at most MaxFileBytes) and compares a content hash, which no
// coarse modification time or same-size rewrite can fool. A bad new file
// leaves the old map in force; the same bad content is reported once,
// not every poll.
type Watcher struct {
	path     string
	interval time.Duration
	log      *slog.Logger
	// apply installs a freshly parsed map; an error keeps the old one
	// (e.g. a server the new map adds cannot be set up).
	apply func(*Map) error
	// count records each reload attempt's result.
	count func(result string)

	mu      sync.Mutex
	sum     [sha256.Size]byte
	badSum  [sha256.Size]byte
	loadErr error
}

// WatcherConfig configures NewWatcher.
type WatcherConfig struct {
	// Path is the map file.
	Path string
	// Interval between polls; 0 means DefaultPollInterval.
	Interval time.Duration
	// Logger receives reload successes (info) and failures (error).
	Logger *slog.Logger
	// Apply installs a map: called once by NewWatcher and after every
	// successful re-read. An error keeps the previous map in force.
	Apply func(*Map) error
	// Count, when set, is called with ReloadSuccess or ReloadFailure.
	Count func(result string)
}

// NewWatcher loads the file once and installs it with Apply; an error
// there (a bad file at startup) is returned and nothing is installed.
func NewWatcher(cfg WatcherConfig) (*Watcher, error) {
	w := &Watcher{path: cfg.Path, interval: cfg.Interval, log: cfg.Logger, apply: cfg.Apply, count: cfg.Count}
	if w.interval <= 0 {
		w.interval = DefaultPollInterval
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.count == nil {
		w.count = func(string) {}
	}
	data, err := readFile(w.path)
	if err != nil {
		return nil, err
	}
	m, err := Parse(data)
	if err != nil {
		return nil, errorIn(w.path, err)
	}
	if err := w.apply(m); err != nil {
		return nil, errorIn(w.path, err)
	}
	w.sum = sha256.Sum256(data)
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

// Run polls until ctx is done.
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
// whether a new map was installed. Run calls it; tests call it directly.
func (w *Watcher) Poll() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	data, err := readFile(w.path)
	if err != nil {
		// A ConfigMap swap can leave the path missing for an instant:
		// keep the old map and look again at the next poll.
		w.fail(err, [sha256.Size]byte{})
		return false
	}
	sum := sha256.Sum256(data)
	if sum == w.sum {
		// The file is the map in force (perhaps back after a bad version).
		w.badSum, w.loadErr = [sha256.Size]byte{}, nil
		return false
	}
	if sum == w.badSum {
		return false // a bad file already reported
	}
	m, err := Parse(data)
	if err == nil {
		err = w.apply(m)
	}
	if err != nil {
		w.fail(errorIn(w.path, err), sum)
		return false
	}
	w.sum, w.badSum, w.loadErr = sum, [sha256.Size]byte{}, nil
	w.count(ReloadSuccess)
	w.log.Info("model map reloaded", "file", w.path, "models", len(m.Models), "servers", len(m.Servers))
	return true
}

func (w *Watcher) fail(err error, sum [sha256.Size]byte) {
	if sum != ([sha256.Size]byte{}) {
		w.badSum = sum
	}
	if w.loadErr != nil && w.loadErr.Error() == err.Error() {
		return // the same problem, still there
	}
	w.loadErr = err
	w.count(ReloadFailure)
	w.log.Error("model map reload failed; the previous map stays in force", "file", w.path, "error", err.Error())
}

// LastError returns the problem of the last failed reload, nil after a
// successful one.
func (w *Watcher) LastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loadErr
}
