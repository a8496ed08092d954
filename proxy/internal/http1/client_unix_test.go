//go:build unix

package http1

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestClientIdleCheck: a connection goes back to the pool without its
// exchange's deadline (which would otherwise fail the peek once it
// passed), and one the server closed while idle is not reused.
func TestClientIdleCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	cl := New(Limits{})
	defer cl.Close()
	key := ln.Addr().String()
	c, err := cl.get(context.Background(), key, time.Time{}, false, true)
	if err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	// The last exchange's deadline, already passed.
	if err := c.nc.SetDeadline(aLongTimeAgo); err != nil {
		t.Fatal(err)
	}
	cl.put(c)
	again, err := cl.get(context.Background(), key, time.Time{}, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if again != c {
		t.Fatal("an idle connection past its last exchange's deadline was not reused")
	}
	cl.put(again)
	_ = server.Close()
	// Wait for the server's close to reach the client's side (the socket
	// readable, peeked, not read): an event, not a sleep.
	_ = c.nc.SetReadDeadline(time.Now().Add(30 * time.Second)) // generous: a busy machine
	rc, err := c.nc.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if err := rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return !errors.Is(err, syscall.EAGAIN)
	}); err != nil {
		t.Fatal(err)
	}
	third, err := cl.get(context.Background(), key, time.Time{}, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if third == c {
		t.Fatal("a connection the server closed while idle was reused")
	}
	if n := cl.Open(); n != 1 {
		t.Errorf("%d connections open, want 1", n)
	}
}
