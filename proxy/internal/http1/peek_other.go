//go:build !unix

package http1

import "net"

// canPeek: without a non-blocking peek an idle connection is not checked
// before reuse.
const canPeek = false

type peeker struct{}

func newPeeker(net.Conn) *peeker { return nil }

func (*peeker) idleAlive() bool { return true }

// send writes bufs to nc.
func (*peeker) send(bufs *net.Buffers, nc net.Conn) error {
	_, err := bufs.WriteTo(nc)
	return err
}
