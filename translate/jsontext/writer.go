// Package jsontext reads and writes JSON text as TF Serving's rapidjson
// 1.1.0 does, byte for byte: a reader that takes NaN/Infinity and reports
// rapidjson's messages and offsets, and a pretty writer with rapidjson's
// layout, escaping and TF Serving's float format. encoding/json does
// neither: it rejects NaN, keeps the last duplicate key, replaces invalid
// UTF-8, HTML-escapes and prints floats shortest without ".0".
package jsontext

import (
	"encoding/binary"
	"math"
	"slices"
	"strconv"
)

// indentUnit is rapidjson PrettyWriter's default indent (4 spaces).
const indentUnit = 4

type level struct {
	array bool
	count int
}

// Writer emits JSON with rapidjson PrettyWriter's layout (docs/tfserving-rest.md
// §5.3): a stack of open containers and the "single-line array" flag TF
// Serving toggles per row. Callers are trusted to call it in a valid order.
type Writer struct {
	buf        []byte
	stack      []level
	singleLine bool
}

// NewWriter returns a Writer appending to dst.
func NewWriter(dst []byte) *Writer { return &Writer{buf: dst} }

// Reset makes w append to dst with an empty container stack.
func (w *Writer) Reset(dst []byte) {
	w.buf, w.stack, w.singleLine = dst, w.stack[:0], false
}

// Bytes returns the text written so far.
func (w *Writer) Bytes() []byte { return w.buf }

// Discard drops the first n bytes written (handed over by a caller writing
// in pieces), keeping the rest and the container state.
func (w *Writer) Discard(n int) {
	w.buf = w.buf[:copy(w.buf, w.buf[n:])]
}

// SetSingleLine switches rapidjson's kFormatSingleLineArray on or off.
func (w *Writer) SetSingleLine(on bool) { w.singleLine = on }

func (w *Writer) indent(depth int) {
	// Copied from a run of spaces: a byte-at-a-time loop showed up, as a
	// pretty-printed tensor writes an indent before every value.
	n := depth * indentUnit
	for n > len(spaces) {
		w.buf = append(w.buf, spaces...)
		n -= len(spaces)
	}
	w.buf = append(w.buf, spaces[:n]...)
}

// spaces is the run indent copies from.
const spaces = "                                                                "

// prefix is rapidjson PrettyWriter::PrettyPrefix: what goes before a value
// or a key in the enclosing container.
func (w *Writer) prefix() {
	n := len(w.stack)
	if n == 0 {
		return
	}
	l := &w.stack[n-1]
	switch {
	case l.array && w.singleLine:
		if l.count > 0 {
			w.buf = append(w.buf, ',', ' ')
		}
	case !l.array && l.count%2 == 1: // between a key and its value
		w.buf = append(w.buf, ':', ' ')
	default: // on a new line, after a comma unless it is the first
		if l.count > 0 {
			w.buf = append(w.buf, ',')
		}
		w.buf = append(w.buf, '\n')
		w.indent(n)
	}
	l.count++
}

// StartObject opens an object.
func (w *Writer) StartObject() { w.open(false) }

// EndObject closes the innermost object.
func (w *Writer) EndObject() { w.close() }

// StartArray opens an array.
func (w *Writer) StartArray() { w.open(true) }

// EndArray closes the innermost array.
func (w *Writer) EndArray() { w.close() }

// open opens an array or an object.
func (w *Writer) open(array bool) {
	w.prefix()
	w.stack = append(w.stack, level{array: array})
	w.buf = append(w.buf, "{["[bitIf(array)])
}

// close closes the innermost container (on a new line unless empty or single-line).
func (w *Writer) close() {
	n := len(w.stack)
	l := w.stack[n-1]
	w.stack = w.stack[:n-1]
	if l.count > 0 && !(l.array && w.singleLine) {
		w.buf = append(w.buf, '\n')
		w.indent(n - 1)
	}
	w.buf = append(w.buf, "}]"[bitIf(l.array)])
}

// Key writes an object key: rapidjson writes it as a string.
func (w *Writer) Key(k string) { w.String(k) }

// String writes a string value.
func (w *Writer) String(s string) {
	w.prefix()
	w.buf = AppendString(w.buf, s)
}

// StringBytes writes a string value of raw bytes (no UTF-8 check, as rapidjson).
func (w *Writer) StringBytes(s []byte) {
	w.prefix()
	w.buf = AppendString(w.buf, s)
}

// Raw writes an already formatted scalar as one value.
func (w *Writer) Raw(text []byte) {
	w.prefix()
	w.buf = append(w.buf, text...)
}

// Bool writes true or false.
func (w *Writer) Bool(b bool) {
	w.prefix()
	w.buf = strconv.AppendBool(w.buf, b)
}

// Int64 writes a signed integer.
func (w *Writer) Int64(v int64) {
	w.prefix()
	w.buf = strconv.AppendInt(w.buf, v, 10)
}

// Uint64 writes an unsigned integer.
func (w *Writer) Uint64(v uint64) {
	w.prefix()
	w.buf = strconv.AppendUint(w.buf, v, 10)
}

// Float32 writes a float in TF Serving's DT_FLOAT format.
func (w *Writer) Float32(f float32) {
	w.prefix()
	w.buf = AppendFloat32(w.buf, f)
}

// Float32s writes the little-endian float32s in le as Float32 would, one
// value each (SingleLineFloat32sPart writes a single-line nested value).
func (w *Writer) Float32s(le []byte) {
	for ; len(le) >= 4; le = le[4:] {
		w.Float32(math.Float32frombits(binary.LittleEndian.Uint32(le)))
	}
}

// Float64 writes a double in TF Serving's DT_DOUBLE format.
func (w *Writer) Float64(d float64) {
	w.prefix()
	w.buf = AppendFloat64(w.buf, d)
}

const hexUpper = "0123456789ABCDEF"

// escapeTable marks the bytes rapidjson escapes: control characters, '"'
// and '\\'. Nothing else: not '/', DEL, '<', U+2028 or invalid UTF-8.
var escapeTable = func() (t [256]byte) {
	for c := 0; c < 0x20; c++ {
		t[c] = 'u'
	}
	t['\b'], t['\t'], t['\n'], t['\f'], t['\r'] = 'b', 't', 'n', 'f', 'r'
	t['"'], t['\\'] = '"', '\\'
	return t
}()

// quotedLen returns the length of AppendString's output for s.
func quotedLen(s []byte) int {
	n := len(s) + 2
	for _, c := range s {
		if e := escapeTable[c]; e == 'u' {
			n += 5 // \u00XX
		} else if e != 0 {
			n++ // \X
		}
	}
	return n
}

// AppendString appends s as a JSON string with rapidjson's escaping.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		e := escapeTable[s[i]]
		if e == 0 {
			continue
		}
		dst = append(dst, s[start:i]...)
		if e == 'u' {
			dst = append(dst, '\\', 'u', '0', '0', hexUpper[s[i]>>4], hexUpper[s[i]&0xF])
		} else {
			dst = append(dst, '\\', e)
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Nest is the position in one nested-array value written over several
// calls, the next element's index per dimension, from the zero Nest (or
// Reset) on: for SingleLineFloat32sPart, or a caller writing other types
// with the Writer's calls (Begin, Next, Advance).
type Nest struct {
	idx     []int64 // index of the next element, per dimension
	written int64   // elements written
	n       int64   // elements in the value
	started bool
}

// Reset makes the Nest start a new value, keeping its memory.
func (n *Nest) Reset() { *n = Nest{idx: n.idx[:0]} }

// Started reports whether Begin was called since the last Reset.
func (n *Nest) Started() bool { return n.started }

// Done reports that every element of the value has been written.
func (n *Nest) Done() bool { return n.started && n.written == n.n }

// Written returns the number of elements written so far.
func (n *Nest) Written() int64 { return n.written }

// Begin starts a value of shape (rank >= 1) and returns its element count.
func (n *Nest) Begin(shape []int64) int64 {
	n.started = true
	n.idx = slices.Grow(n.idx[:0], len(shape))[:len(shape)]
	clear(n.idx)
	n.n = 1
	for _, d := range shape {
		n.n *= d
	}
	return n.n
}

// Next prepares the next run of a started, unfinished value: k arrays to
// close and reopen before it (0 at the first element and inside an
// innermost array), room elements left in its innermost array.
func (n *Nest) Next(shape []int64) (k int, room int64) {
	last := len(shape) - 1
	idx := n.idx
	if idx[last] == shape[last] {
		idx[last] = 0
		k = 1
		for d := last - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
			k++
		}
	}
	return k, shape[last] - idx[last]
}

// Advance records that the next r elements (at most Next's room) were written.
func (n *Nest) Advance(r int64) {
	n.idx[len(n.idx)-1] += r
	n.written += r
}

// SingleLineFloat32sPart continues the single-line nested value of the
// given shape at nest's position with the little-endian float32s in le
// (the next len(le)/4 elements; any beyond the value are ignored): the
// text of StartArray/Float32s/EndArray calls in single-line mode ("[[a,
// b], [c, d]]") without their per-array bookkeeping, which dominates a
// small innermost dimension (an image's 3 channels). Calls together write
// what one call would, so a tensor is written as its bytes arrive; the
// first writes the prefix and opening brackets, the last the closing ones.
// The value has elements, and w stays in single-line mode.
func (w *Writer) SingleLineFloat32sPart(nest *Nest, shape []int64, le []byte) {
	rank := len(shape)
	if !nest.started {
		w.prefix()
		nest.Begin(shape)
		w.buf = appendRepeat(w.buf, '[', rank)
	}
	buf := w.buf
	for len(le) >= 4 && nest.written < nest.n {
		k, room := nest.Next(shape)
		switch {
		case k > 0:
			buf = appendRepeat(buf, ']', k)
			buf = append(buf, ',', ' ')
			buf = appendRepeat(buf, '[', k)
		case nest.written > 0:
			buf = append(buf, ',', ' ')
		}
		r := min(room, int64(len(le)/4))
		// The whole innermost lists that follow in the same parent list
		// go in the same call, which writes their "], [" itself.
		var rows, inner int64
		if r == room && rank >= 2 {
			inner = shape[rank-1]
			rows = min(shape[rank-2]-1-nest.idx[rank-2], (int64(len(le)/4)-r)/inner)
		}
		col := 0 // values of the current innermost list already written
		if inner > 0 {
			col = int(inner - room)
		}
		buf = appendFloat32s(buf, le[:4*(r+rows*inner)], int(inner), col)
		le = le[4*(r+rows*inner):]
		nest.Advance(r)
		if rows > 0 {
			nest.idx[rank-2] += rows // each list complete, as Next expects
			nest.written += rows * inner
		}
	}
	if nest.written == nest.n {
		buf = appendRepeat(buf, ']', rank)
	}
	w.buf = buf
}

// appendRepeat appends n copies of c.
func appendRepeat(buf []byte, c byte, n int) []byte {
	for range n {
		buf = append(buf, c)
	}
	return buf
}

// SingleLine reports whether single-line array mode is on.
func (w *Writer) SingleLine() bool { return w.singleLine }
