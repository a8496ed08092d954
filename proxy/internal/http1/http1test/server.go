// Package http1test is a scripted HTTP/1.1 server on a raw socket, for the
// tests of the HTTP/1.1 client and of the proxy that uses it: it answers
// with bytes a test writes by hand (malformed, interim, early closes),
// which net/http's server would never send.
package http1test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Request is a request the server read, with its body.
type Request struct {
	*http.Request
	Body string
}

// Server reads each request with net/http's parser, keeps it, and writes
// the raw answer its script gives for it.
type Server struct {
	// Addr is the server's host:port on 127.0.0.1.
	Addr string

	answer func(i int, r *http.Request) (raw string, closeAfter bool)

	mu    sync.Mutex
	reqs  []Request
	conns int
	// open are the open connections, closed at the test's end: a
	// client's idle ones would otherwise hold the cleanup until their
	// deadline.
	open map[net.Conn]bool
}

// Start starts a server that answers the i-th request it reads (from 0),
// r, with answer's raw bytes, and closes the connection after them when
// answer says so (or the write fails). Each connection has a 30-second
// deadline, so that a hung test ends; everything is closed when the test
// ends.
func Start(t testing.TB, answer func(i int, r *http.Request) (raw string, closeAfter bool)) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), answer: answer, open: map[net.Conn]bool{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for c := range s.open {
			_ = c.Close()
		}
		s.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns++
			s.open[c] = true
			s.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serve(c)
			}()
		}
	}()
	return s
}

// serve answers c's requests until its script, the peer or the deadline
// ends it.
func (s *Server) serve(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.open, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	for {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		i := len(s.reqs)
		s.reqs = append(s.reqs, Request{Request: r, Body: string(b)})
		s.mu.Unlock()
		raw, closeAfter := s.answer(i, r)
		if _, err := io.WriteString(c, raw); err != nil || closeAfter {
			return
		}
	}
}

// Requests returns the requests read so far, in order, and the number of
// connections accepted.
func (s *Server) Requests() (reqs []Request, conns int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[:len(s.reqs):len(s.reqs)], s.conns
}
