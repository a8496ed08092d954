package observe

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// LogLimiter writes the first line of each key, drops the rest within the
// interval, and says how many it dropped on the next line it writes.
func TestLogLimiter(t *testing.T) {
	var buf bytes.Buffer
	l := &LogLimiter{Logger: slog.New(slog.NewTextHandler(&buf, nil)), Interval: time.Hour}
	for range 5 {
		l.Log(slog.LevelWarn, "not_tls", "refused", "reason", "not_tls")
	}
	l.Log(slog.LevelWarn, "timeout", "refused", "reason", "timeout")
	if n := strings.Count(buf.String(), "\n"); n != 2 {
		t.Fatalf("%d lines, want one per key:\n%s", n, buf.String())
	}
	l.Interval = 0 // the hour has passed
	buf.Reset()
	l.Log(slog.LevelWarn, "not_tls", "refused", "reason", "not_tls")
	if !strings.Contains(buf.String(), "suppressed_since_last=4") {
		t.Errorf("next line %q does not count the 4 dropped", buf.String())
	}
	var none *LogLimiter
	none.Log(slog.LevelWarn, "k", "nil-safe")
}
