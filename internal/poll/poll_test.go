package poll

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	for _, tc := range []struct {
		name   string
		after  int32 // cond holds from this call on (0: never)
		within time.Duration
		want   bool
	}{
		{"holds at once", 1, time.Minute, true},
		{"holds on the third check", 3, time.Minute, true},
		{"never holds", 0, 20 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			got := Until(tc.within, func() bool { return tc.after != 0 && calls.Add(1) >= tc.after })
			if got != tc.want {
				t.Fatalf("Until = %v, want %v", got, tc.want)
			}
			if tc.want && calls.Load() != tc.after {
				t.Errorf("cond checked %d times, want %d (Until must stop once it holds)", calls.Load(), tc.after)
			}
		})
	}
}
