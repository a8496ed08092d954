package observe

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// LogLimiter writes at most one line per key and interval: for events a
// peer can cause at will (refused TLS handshakes), whose every occurrence
// is counted in a metric but must not flood the log. The next line after
// a quiet period says how many were left out.
type LogLimiter struct {
	Logger   *slog.Logger
	Interval time.Duration

	mu   sync.Mutex
	last map[string]limited
}

type limited struct {
	at         time.Time
	suppressed int
}

// Log writes msg with args at level unless a line with the same key was
// written less than Interval ago.
func (l *LogLimiter) Log(level slog.Level, key, msg string, args ...any) {
	if l == nil || l.Logger == nil {
		return
	}
	now := time.Now()
	l.mu.Lock()
	if l.last == nil {
		l.last = map[string]limited{}
	}
	e := l.last[key]
	if !e.at.IsZero() && now.Sub(e.at) < l.Interval {
		e.suppressed++
		l.last[key] = e
		l.mu.Unlock()
		return
	}
	l.last[key] = limited{at: now}
	l.mu.Unlock()
	if e.suppressed > 0 {
		args = append(args, "suppressed_since_last", e.suppressed)
	}
	l.Logger.Log(context.Background(), level, msg, args...)
}
