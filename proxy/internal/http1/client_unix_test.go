//go:build unix

package http1

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
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

// TestPeekerSend: send writes every byte and returns once the answer can
// be read (the read then finds it at once), and fails as the write itself
// would when the wait cannot begin (a deadline passed, a closed
// connection).
func TestPeekerSend(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(c net.Conn)
		isErr error
	}{
		{"answered", func(net.Conn) {}, nil},
		{"deadline passed", func(c net.Conn) { _ = c.SetDeadline(aLongTimeAgo) }, os.ErrDeadlineExceeded},
		{"closed", func(c net.Conn) { _ = c.Close() }, net.ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answerNow := make(chan struct{})
			c, got := serveOne(t, func(s net.Conn, got chan<- string) {
				b := make([]byte, 5)
				if _, err := io.ReadFull(s, b); err != nil {
					got <- err.Error()
					return
				}
				got <- string(b)
				<-answerNow
				_, _ = s.Write([]byte("answer"))
			})
			tc.setup(c)
			bufs := net.Buffers{[]byte("he"), []byte("llo")}
			if tc.isErr != nil {
				close(answerNow)
				err := newPeeker(c).send(&bufs, c)
				var want error
				wbufs := net.Buffers{[]byte("x")}
				_, want = wbufs.WriteTo(c)
				if !errors.Is(err, tc.isErr) || err.Error() != want.Error() {
					t.Errorf("send: %v, want the write's own %v", err, want)
				}
				return
			}
			sent := make(chan error, 1)
			go func() { sent <- newPeeker(c).send(&bufs, c) }()
			if g := <-got; g != "hello" {
				t.Fatalf("the server got %q", g)
			}
			select {
			case err := <-sent:
				t.Fatalf("send returned (%v) before the server answered", err)
			default:
			}
			close(answerNow)
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			// send returned when the answer could be read: a non-blocking
			// peek finds it (idleAlive is false when bytes wait).
			if newPeeker(c).idleAlive() {
				t.Error("send returned before the answer could be read")
			}
			b := make([]byte, 16)
			if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Read(b); err != nil || string(b[:n]) != "answer" {
				t.Errorf("read after send: %q %v", b[:n], err)
			}
		})
	}
}

// TestPeekerSendOnce: whatever becomes of send's wait for the answer —
// it cannot begin (only the read deadline passed: the write would still
// succeed), or it ends at the read deadline with no answer — the request
// is written exactly once and send reports the write's success: a POST is
// never sent twice, and a failed wait is left to the read that follows.
func TestPeekerSendOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline func() time.Time
	}{
		{"read deadline passed", func() time.Time { return aLongTimeAgo }},
		{"read deadline during the wait", func() time.Time { return time.Now().Add(50 * time.Millisecond) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, got := serveOne(t, func(s net.Conn, got chan<- string) {
				b, err := io.ReadAll(s) // all the client wrote, to its close
				if err != nil {
					got <- err.Error()
					return
				}
				got <- string(b)
			})
			if err := c.SetReadDeadline(tc.deadline()); err != nil {
				t.Fatal(err)
			}
			bufs := net.Buffers{[]byte("he"), []byte("llo")}
			if err := newPeeker(c).send(&bufs, c); err != nil {
				t.Errorf("send: %v, want the write's success", err)
			}
			// The read that follows meets the deadline.
			if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("read after send: %v, want the deadline", err)
			}
			_ = c.Close()
			if g := <-got; g != "hello" {
				t.Errorf("the server got %q, want the request once", g)
			}
		})
	}
}

// serveOne listens on loopback, runs serve on the one connection it
// accepts (its deadline 30 s away: generous, for a busy machine) and
// returns the client's end of it, closed with the test, and the channel
// serve reports on (an accept failure is reported there too).
func serveOne(t *testing.T, serve func(s net.Conn, got chan<- string)) (net.Conn, <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	got := make(chan string, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(30 * time.Second))
		serve(s, got)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, got
}
