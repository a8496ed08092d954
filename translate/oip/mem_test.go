package oip

import "runtime"

// runtimeMem samples the bytes allocated so far by the process.
type runtimeMem struct{ bytes uint64 }

func (m *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.bytes = ms.TotalAlloc
}
