//go:build unix

package e2e

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system, every thread) the test
// process has used so far: the path benchmarks run the client, the Envoy
// stand-in, tfsbridge and the mock in it, so its growth over a row is the
// whole path's CPU, which a busy machine disturbs far less than the wall
// clock. ok is false where it cannot be read.
func processCPU() (_ time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
