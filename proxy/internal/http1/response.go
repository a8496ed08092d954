package http1

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"strings"
)

// Response is an answer read on one of a Client's connections: its head,
// and its body, read from the connection by Read. It belongs to the
// connection: valid until Close, which every caller calls.
type Response struct {
	StatusCode int
	// ContentLength is the body's declared length; -1 when not declared
	// (chunked, or until the connection closes).
	ContentLength int64

	c      *conn
	close  bool        // the connection is not reused after this answer
	head   []byte      // the common form's header lines (c's buffer), nil otherwise
	header http.Header // net/http's parse of a head not of the common form
	body   io.Reader   // net/http's body reader; nil: ContentLength bytes from c.br
	left   int64       // the common form's body bytes not read yet
	read   int64       // body bytes read
	eof    bool        // the body's end was read
	done   bool
	stop   func() bool // stops watching the exchange's context; nil if not watched
}

// reset readies r for the next exchange.
func (r *Response) reset() {
	c := r.c
	*r = Response{c: c, head: r.head[:0]}
}

// fail ends r's exchange before its answer.
func (r *Response) fail(err error) error {
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
	return err
}

// Closes reports whether the server closes the connection after this
// answer (or the connection is not reused for another reason).
func (r *Response) Closes() bool { return r.close }

// Get returns the first value of the header key (case-insensitive), ""
// when it is not there: http.Header.Get's answer.
func (r *Response) Get(key string) string {
	if r.header != nil {
		return r.header.Get(key)
	}
	for rest := r.head; len(rest) > 0; {
		var line []byte
		line, rest = cutLine(rest)
		k, v, _ := cutField(line)
		if equalFold(k, key) && !closeField(k, v) {
			return internValue(v)
		}
	}
	return ""
}

// Header returns the answer's header as net/http's parser gives it. It
// allocates it (a common-form head keeps only its bytes); the caller may
// keep it.
func (r *Response) Header() http.Header {
	if r.header != nil {
		return r.header
	}
	n := 0
	for rest := r.head; len(rest) > 0; n++ {
		_, rest = cutLine(rest)
	}
	h := make(http.Header, n)
	if n == 0 {
		return h
	}
	// One string for the head, its keys and values substrings of it, and
	// one array for the values, as textproto's reader does.
	s := string(r.head)
	vals := make([]string, n)
	for i := 0; len(s) > 0; i++ {
		var line string
		line, s, _ = strings.Cut(s, "\r\n")
		k, v, _ := strings.Cut(line, ":")
		v = strings.Trim(v, " \t")
		if closeField([]byte(k), []byte(v)) {
			continue
		}
		k = textproto.CanonicalMIMEHeaderKey(k)
		vals[i] = v
		if old, ok := h[k]; ok {
			h[k] = append(old, vals[i])
		} else {
			h[k] = vals[i : i+1 : i+1]
		}
	}
	r.header = h
	return h
}

// closeField reports "Connection: close", which net/http's parser
// takes out of the header (Response.Closes says it).
func closeField(k, v []byte) bool {
	return equalFold(k, "Connection") && equalFold(v, "close")
}

// errClosedBody is a read after Close.
var errClosedBody = errors.New("http1: read on closed response body")

// Read reads the answer's body.
func (r *Response) Read(p []byte) (int, error) {
	if r.done {
		return 0, errClosedBody
	}
	var n int
	var err error
	if r.body != nil {
		n, err = r.body.Read(p)
	} else {
		if r.left == 0 {
			r.eof = true
			return 0, io.EOF
		}
		if int64(len(p)) > r.left {
			p = p[:r.left]
		}
		n, err = r.c.br.Read(p)
		r.left -= int64(n)
		if errors.Is(err, io.EOF) && r.left > 0 {
			err = io.ErrUnexpectedEOF // the server closed before the body's end
		} else if r.left == 0 && err == nil {
			r.eof = true
		}
	}
	r.read += int64(n)
	if errors.Is(err, io.EOF) {
		r.eof = true
	}
	return n, err
}

// ReadErr is err from Read, or ctx's cause when ctx ended the exchange
// (its I/O was cut).
func ReadErr(ctx context.Context, err error) error {
	if err != nil && !errors.Is(err, io.EOF) && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// Close ends the exchange: the connection goes back to the pool when
// the body was read to its end and nothing follows it; otherwise it is
// closed without reading on.
func (r *Response) Close() error {
	if r.done {
		return nil
	}
	r.done = true
	watched := true
	if r.stop != nil {
		watched = r.stop() // false: the cancellation cut the connection
		r.stop = nil
	}
	c := r.c
	// A body of known length read to its last byte is done with the
	// connection without its EOF read.
	whole := r.eof || (r.ContentLength >= 0 && r.read == r.ContentLength)
	if watched && whole && !r.close && c.br.Buffered() == 0 {
		c.cl.put(c)
		return nil
	}
	c.cl.discard(c)
	return nil
}
