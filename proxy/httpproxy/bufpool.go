package httpproxy

import "sync"

// copyBufferSize is the size of the buffers the reverse proxy copies
// answers through: httputil.ReverseProxy's own choice when it has no pool.
const copyBufferSize = 32 << 10

// bufferPool is an httputil.BufferPool. Without one, ReverseProxy
// allocates (and zeroes) a fresh 32 KiB buffer for every answer it copies
// — for a small request the largest allocation of the exchange.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any {
		b := make([]byte, copyBufferSize)
		return &b
	}}}
}

// Get returns a buffer of copyBufferSize bytes.
func (bp *bufferPool) Get() []byte { return *bp.p.Get().(*[]byte) }

// getPtr is Get for the proxy's own reads: the buffer with the pointer
// the pool keeps, so that putPtr gives it back without allocating one.
func (bp *bufferPool) getPtr() *[]byte { return bp.p.Get().(*[]byte) }

// putPtr returns a buffer from getPtr.
func (bp *bufferPool) putPtr(b *[]byte) { bp.p.Put(b) }

// Put returns b to the pool; a buffer of another size is dropped.
func (bp *bufferPool) Put(b []byte) {
	if cap(b) != copyBufferSize {
		return
	}
	b = b[:copyBufferSize]
	bp.p.Put(&b)
}
