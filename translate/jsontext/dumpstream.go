package jsontext

import (
	"math"
	"slices"
)

// DumpStream renders TF Serving's bounded dump of a value from its tokens
// as a one-pass reader reads them. It stops for good once the output has
// reached its limit (the token crossing it still written whole) or after
// a NaN or Infinity, so feeding it more costs nothing.
type DumpStream struct {
	w       Writer
	limit   int
	stopped bool
	// tail is the string token that crossed the limit, copied and
	// rendered only when the dump is asked for: it may be megabytes (a
	// b64 payload), and most dumps are never printed.
	tail    []byte
	hasTail bool
	stable  bool // tail is the caller's (StringStable), not a copy
}

// Reset starts a new dump appended to dst, limited to DumpLimit bytes.
func (s *DumpStream) Reset(dst []byte) {
	s.w.Reset(dst)
	s.w.SetSingleLine(true)
	s.limit, s.stopped, s.hasTail = len(dst)+DumpLimit, false, false
}

// Restart starts a new dump in the buffer of the last one.
func (s *DumpStream) Restart() { s.Reset(s.w.buf[:0]) }

// Bytes returns the dump so far.
func (s *DumpStream) Bytes() []byte {
	if s.hasTail {
		s.hasTail = false
		// Grown once to its escaped length and prefix: the tail (a b64
		// payload, or a MiB of escapes) appended piece by piece would
		// allocate several times.
		s.w.buf = slices.Grow(s.w.buf, quotedLen(s.tail)+2+indentUnit*len(s.w.stack))
		s.w.StringBytes(s.tail)
	}
	return s.w.Bytes()
}

// Full reports that no further token would be written.
func (s *DumpStream) Full() bool { return s.stopped || len(s.w.buf) >= s.limit }

// Feed writes one token (not NeedMore) as the dump renders it (a key as
// a string; a NaN or an Infinity only its separator, ending the dump) and
// reports whether the dump goes on.
func (s *DumpStream) Feed(tok Token) bool { return s.feed(tok, false) }

// FeedStable is Feed for a string token whose Str its caller keeps
// unmodified while the dump is in use: the token crossing the limit (maybe
// a megabyte payload) is then kept where it is, not copied.
func (s *DumpStream) FeedStable(tok Token) bool { return s.feed(tok, true) }

func (s *DumpStream) feed(tok Token, stable bool) bool {
	if s.Full() { // the limited writer's check before a token
		s.stopped = true
		return false
	}
	w := &s.w
	switch n := tok.Num; tok.Kind {
	case BeginArray, BeginObject:
		w.open(tok.Kind == BeginArray)
	case EndArray, EndObject:
		w.close()
	case Key, StringValue:
		v := tok.Str
		if len(w.buf)+len(v)+2 < s.limit {
			// Grown once for the token, its quotes and its line's
			// prefix: byte by byte, the first key alone cost two.
			w.buf = slices.Grow(w.buf, len(v)+4+indentUnit*len(w.stack))
			w.StringBytes(v)
			break
		}
		// The last token: kept as is, rendered by Bytes.
		switch {
		case stable:
			s.tail = v
		case s.stable:
			s.tail = append([]byte(nil), v...) // never into the caller's bytes
		default:
			s.tail = append(s.tail[:0], v...)
		}
		s.hasTail, s.stopped, s.stable = true, true, stable
		return false
	case TrueValue, FalseValue:
		w.Bool(tok.Kind == TrueValue)
	case NullValue:
		w.Raw([]byte("null"))
	case NumberValue:
		switch {
		case n.flags&flagDouble != 0:
			f := math.Float64frombits(n.bits)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				w.Raw(nil)
				s.stopped = true
				return false
			}
			var tmp [32]byte
			w.Raw(appendGrisu(tmp[:0], f))
		case n.flags&flagNeg != 0:
			w.Int64(int64(n.bits))
		default:
			w.Uint64(n.bits)
		}
	}
	return true
}
