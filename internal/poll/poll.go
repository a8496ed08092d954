// Package poll is how tests wait for state that other goroutines change
// with nothing to signal it (a metric, a count of held bytes, a goroutine
// count): cond is checked on a short tick until it holds or the deadline
// passes. The deadline only bounds a failure, so callers give a generous
// one (tens of seconds: a loaded 2-core machine may deschedule a server
// for seconds); a test never relies on it passing.
package poll

import "time"

// Tick is how often Until checks its condition.
const Tick = 2 * time.Millisecond

// Until checks cond now and then every Tick until it holds (true) or
// within has passed (false).
func Until(within time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(Tick)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if cond() {
				return true
			}
		case <-deadline.C:
			return cond()
		}
	}
}
