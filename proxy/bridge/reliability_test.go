package bridge

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// eventually waits, up to within, for cond to hold, checking it every few
// milliseconds: for effects that happen on the servers' goroutines after
// the client saw its answer. within is generous (tens of seconds) so a
// busy machine never fails the test; a broken cond fails it at the end.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
