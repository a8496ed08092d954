package bridge

import (
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/shadow"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// ShadowOptions bound the shadow comparison of the models whose map entry
// has a `shadow:` block (see package shadow).
type ShadowOptions struct {
	// MaxBytes caps the memory all shadow copies hold together; a copy
	// that does not fit is dropped and counted.
	MaxBytes int64
	// Timeout bounds one copy's call to its shadow server.
	Timeout time.Duration
	// LogMaxBytes caps each mismatch_log file.
	LogMaxBytes int64
	// LogPerSecond bounds the lines written to each mismatch_log file
	// per second.
	LogPerSecond float64
}

// defaultShadowOptions are the shadow bounds DefaultOptions sets.
func defaultShadowOptions() ShadowOptions {
	return ShadowOptions{MaxBytes: shadow.DefaultMaxBytes, Timeout: shadow.DefaultTimeout,
		LogMaxBytes: shadow.DefaultLogMaxBytes, LogPerSecond: shadow.DefaultLogPerSecond}
}

// invalid names the first invalid shadow option ("" when none).
func (s ShadowOptions) invalid() (field string) {
	switch {
	case s.MaxBytes <= 0:
		return "Shadow.MaxBytes"
	case s.Timeout <= 0:
		return "Shadow.Timeout"
	case s.LogMaxBytes <= 0:
		return "Shadow.LogMaxBytes"
	case !(s.LogPerSecond > 0):
		return "Shadow.LogPerSecond"
	}
	return ""
}

// newShadow is the shadow engine of a bridge with a model map: its copies
// reach the servers through the backend transport (its TLS included).
func newShadow(o Options, tr http.RoundTripper, defaultURL *url.URL, limits tensor.Limits, m *observe.Metrics, log *slog.Logger) *shadow.Engine {
	if tr == nil {
		tr = backend.NewTransport(o.BackendTimeout)
	}
	return shadow.New(shadow.Options{
		Metrics: m, Logger: log, Transport: tr, DefaultURL: defaultURL,
		MaxBytes: o.Shadow.MaxBytes, MaxBodyBytes: o.MaxBodyBytes, Limits: limits,
		Timeout: o.Shadow.Timeout, LogMaxBytes: o.Shadow.LogMaxBytes, LogPerSecond: o.Shadow.LogPerSecond,
	})
}
