package admission

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// CgroupMemoryMax is where cgroup v2 publishes the container's memory
// limit.
const CgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// FallbackLimit is the in-flight budget when no memory limit is known
// (neither GOMEMLIMIT nor a cgroup limit): room for three requests at the
// default 64 MiB body limit.
const FallbackLimit = 4 << 30

// softLimitShare is the part of the cgroup limit given to the Go runtime
// as its soft memory limit: the rest is for what the runtime does not
// count (thread stacks outside the heap, the binary, page cache charged
// to the container).
const softLimitShare = 0.9

// budgetShare is the part of the memory limit DefaultLimit reserves for
// exchanges; the rest is for everything else the process holds (metadata
// cache, connections, the runtime's own overhead between collections).
const budgetShare = 0.5

// CgroupLimit reads a cgroup v2 memory.max file: the limit in bytes, or 0
// when the file is missing, unreadable or says "max".
func CgroupLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// SetSoftMemoryLimit makes the Go runtime aware of the container's memory
// limit: when GOMEMLIMIT is not set (lookupEnv) and cgroupPath holds a
// limit, the runtime's soft limit becomes 90% of it, so that the
// collector works harder and returns memory to the OS as the process
// nears the limit, instead of growing the heap to twice its live size
// and being killed. It returns the soft limit in force afterwards (0 when
// there is none) and whether it was set here.
func SetSoftMemoryLimit(lookupEnv func(string) (string, bool), cgroupPath string) (limit int64, set bool) {
	if _, ok := lookupEnv("GOMEMLIMIT"); !ok {
		if cg := CgroupLimit(cgroupPath); cg > 0 {
			debug.SetMemoryLimit(int64(float64(cg) * softLimitShare))
			set = true
		}
	}
	return MemoryLimit(), set
}

// DefaultLimit is the default of --max-inflight-bytes: half of the Go
// runtime's soft memory limit (GOMEMLIMIT, or the one SetSoftMemoryLimit
// derived from the cgroup), else FallbackLimit.
func DefaultLimit() int64 {
	if l := MemoryLimit(); l > 0 {
		return int64(float64(l) * budgetShare)
	}
	return FallbackLimit
}

// MemoryLimit returns the Go runtime's soft memory limit, 0 when unset.
func MemoryLimit() int64 {
	l := debug.SetMemoryLimit(-1)
	if l <= 0 || l == math.MaxInt64 {
		return 0
	}
	return l
}
