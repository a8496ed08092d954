package observe

import (
	"net/http"
	"net/http/pprof"
	"runtime"
)

// Sampling of the contention profiles while --pprof is on: one blocking
// event per blockProfileRate nanoseconds blocked, one mutex contention
// event in mutexProfileFraction. Off (Go's default) they stay empty.
const (
	blockProfileRate     = 100_000 // 100µs
	mutexProfileFraction = 100
)

// WithPprof adds Go's runtime profiles under /debug/pprof/ (index, cmdline,
// profile, symbol, trace and every named profile: heap, goroutine, block,
// mutex, allocs, threadcreate) to the admin handler h, which keeps every
// other path. It also turns on the block and mutex profiles' sampling,
// process-wide, which is why it is opt-in. (Importing net/http/pprof also
// registers the handlers on http.DefaultServeMux, which nothing of ours
// serves.)
func WithPprof(h http.Handler) http.Handler {
	runtime.SetBlockProfileRate(blockProfileRate)
	runtime.SetMutexProfileFraction(mutexProfileFraction)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.Handle("/", h)
	return mux
}
