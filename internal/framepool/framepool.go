// Package framepool is a gRPC buffer pool that does not clear the buffers
// it hands out again.
package framepool

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// framePool is grpc-go's default pool, except that a buffer is not
// cleared when it is handed out again.
//
// The ext_proc server reads every DATA frame Envoy sends into one of these buffers
// (io.ReadFull over the whole buffer) and joins frames into one the same
// way (a copy over the whole buffer): nothing reads a buffer before it is
// written, so clearing it is pure cost — for a BUFFERED body, a memclr of
// every byte of the body on top of the read (about a tenth of the
// server's receive time for the 1.76 MB image request).
type framePool struct {
	tiers [maxTier - minTier + 1]sync.Pool
}

// The pooled sizes: powers of two from 256 bytes (below it grpc-go does
// not pool) to 1 MiB (grpc-go's largest default tier); larger buffers are
// allocated and left to the garbage collector.
const (
	minTier = 8
	maxTier = 20
)

var _ mem.BufferPool = (*framePool)(nil)

// New returns an empty pool. The ext_proc server reads frames into it, and
// so does the Envoy stand-in's gRPC client: Envoy does not clear the
// buffers it reads frames into either.
func New() mem.BufferPool { return &framePool{} }

// Get returns a buffer of length n, from the smallest tier that holds it.
func (p *framePool) Get(n int) *[]byte {
	t := max(bits.Len(uint(n-1)), minTier)
	if n <= 0 {
		t = minTier
	}
	if t > maxTier {
		b := make([]byte, n)
		return &b
	}
	if v, ok := p.tiers[t-minTier].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<t)
	return &b
}

// Put keeps b in the largest tier its capacity fills.
func (p *framePool) Put(b *[]byte) {
	t := bits.Len(uint(cap(*b))) - 1
	if t < minTier || t > maxTier {
		return
	}
	*b = (*b)[:cap(*b)]
	p.tiers[t-minTier].Put(b)
}
