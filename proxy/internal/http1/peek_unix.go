//go:build unix

package http1

import (
	"errors"
	"net"
	"syscall"
)

// canPeek: idle connections can be checked without blocking here.
const canPeek = true

// peeker checks an idle connection; it is made once per connection, so
// that a check allocates nothing.
type peeker struct {
	rc    syscall.RawConn
	fn    func(fd uintptr) bool
	alive bool
	b     [1]byte
}

func newPeeker(nc net.Conn) *peeker {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &peeker{rc: rc}
	p.fn = func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), p.b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		p.alive = errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK)
		return true // never wait for readability
	}
	return p
}

// idleAlive reports whether an idle connection is still open at the
// server's end with nothing unread: one non-blocking MSG_PEEK receive,
// which sees a server's idle close (end of stream), a reset, or bytes
// nobody asked for.
func (p *peeker) idleAlive() bool {
	if p == nil {
		return false
	}
	p.alive = false
	return p.rc.Read(p.fn) == nil && p.alive
}
