package observe

import (
	"log/slog"
	"time"
)

// DurationMS is how every log line carries a duration: as key_ms, a
// number of milliseconds (microsecond precision). One unit everywhere,
// named in the key, reads the same in text and JSON logs; slog's own
// time.Duration prints "1.5ms" as text but bare nanoseconds in JSON.
func DurationMS(key string, d time.Duration) slog.Attr {
	return slog.Float64(key+"_ms", float64(d.Microseconds())/1e3)
}
