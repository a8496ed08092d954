package observe

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A duration logs as key_ms in milliseconds, the same number in text and
// JSON.
func TestDurationMS(t *testing.T) {
	for format, want := range map[string]string{"text": "elapsed_ms=1.5", "json": `"elapsed_ms":1.5`} {
		var buf bytes.Buffer
		log, err := NewLogger(&buf, "info", format)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("done", DurationMS("elapsed", 1500*time.Microsecond+400*time.Nanosecond))
		if !strings.Contains(buf.String(), want) {
			t.Errorf("%s: %q lacks %q", format, buf.String(), want)
		}
	}
}
