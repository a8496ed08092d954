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

	// send's state; sendFn is made once, so that a send allocates nothing.
	sendFn func(fd uintptr) bool
	bufs   *net.Buffers
	nc     net.Conn
	wrote  bool
	werr   error
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
	p.sendFn = func(uintptr) bool {
		if p.wrote {
			return true // readable
		}
		p.wrote = true
		_, p.werr = p.bufs.WriteTo(p.nc)
		return p.werr != nil // after a whole write, wait for the answer
	}
	return p
}

// send writes bufs to nc and waits until the answer can be read, both
// inside one RawConn.Read: the poller is armed before the write, so the
// answer's arrival cannot be missed, and the read that follows finds
// it. Through net.Conn.Read the first read would find nothing yet (the
// server has not answered) and only then wait: a syscall per exchange
// for nothing. A wait that fails (the deadline, a cut, a closed
// connection) is left to that read, which fails the same way; the write's
// own error is returned.
func (p *peeker) send(bufs *net.Buffers, nc net.Conn) error {
	if p == nil {
		_, err := bufs.WriteTo(nc)
		return err
	}
	p.bufs, p.nc, p.wrote, p.werr = bufs, nc, false, nil
	_ = p.rc.Read(p.sendFn)
	wrote, err := p.wrote, p.werr
	p.bufs, p.nc, p.werr = nil, nil, nil
	if !wrote {
		// The wait could not begin (a deadline passed, the connection
		// closed): the write meets the same and fails as it would have.
		_, err = bufs.WriteTo(nc)
	}
	return err
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
