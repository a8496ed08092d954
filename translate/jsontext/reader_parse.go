package jsontext

import (
	"bytes"
	"errors"
	"math"
)

// node is one entry of the tape. 24 bytes, no pointers, so a pooled tape of
// a few hundred thousand nodes costs the garbage collector nothing.
type node struct {
	kind  Kind
	flags uint8
	off   uint32 // first byte of the token in the input
	end   uint32 // one past its last byte (a container's closing bracket)
	// bits: a number's payload (integer bits or float64 bits); for a
	// container count<<32 | index of the node after its subtree; for an
	// escaped string len<<32 | offset in Document.strs.
	bits uint64
}

func (n *node) count() uint32 { return uint32(n.bits >> 32) }
func (n *node) next() uint32  { return uint32(n.bits) }

// frame is an open container: its node and its elements so far.
type frame struct {
	node  uint32
	count uint32
}

// maxInput keeps offsets in 32 bits.
const maxInput = math.MaxUint32 - 1

func (d *Document) reset(data []byte) {
	d.data = data
	d.nodes = d.nodes[:0]
	d.strs = d.strs[:0]
	d.frames = d.frames[:0]
}

// parse reads data with the tokenizer (rapidjson's reader, with
// kParseStopWhenDoneFlag), building the tape.
func (d *Document) parse(data []byte, lim Limits) error {
	d.reset(data)
	if len(data) > maxInput {
		return &SyntaxError{msgTooLarge, 0}
	}
	d.reserve(data, lim.MaxValues)
	t := &d.tok
	t.Reset(lim)
	for p := 0; ; {
		tok, q := t.Next(data, p)
		if tok.Kind != NeedMore {
			d.add(tok, q)
			p = q
			continue
		}
		if t.Err() == nil && !t.Done() {
			t.EndChunk(len(data))
			for tok, ok := t.End(); ok; tok, ok = t.End() {
				d.add(tok, len(data))
			}
		}
		break
	}
	var err *SyntaxError
	if errors.As(t.Err(), &err) {
		return err
	}
	return nil // a whole text cuts no token (ErrTokenTooLong)
}

// add puts a token that ends at data[end] on the tape.
func (d *Document) add(tok Token, end int) {
	switch tok.Kind {
	case BeginArray, BeginObject:
		d.addChild()
		k := Array
		if tok.Kind == BeginObject {
			k = Object
		}
		d.frames = append(d.frames, frame{node: uint32(len(d.nodes))})
		d.nodes = append(d.nodes, node{kind: k, off: uint32(tok.Off)})
	case EndArray, EndObject:
		f := d.frames[len(d.frames)-1]
		d.frames = d.frames[:len(d.frames)-1]
		nd := &d.nodes[f.node]
		nd.end = uint32(end)
		nd.bits = uint64(f.count)<<32 | uint64(len(d.nodes))
	case Key:
		d.frames[len(d.frames)-1].count++
		d.addString(tok, end)
	case StringValue:
		d.addChild()
		d.addString(tok, end)
	case NumberValue:
		d.addChild()
		d.nodes = append(d.nodes, node{kind: Number, flags: tok.Num.flags, off: uint32(tok.Off), end: uint32(end), bits: tok.Num.bits})
	default:
		d.addChild()
		d.nodes = append(d.nodes, node{kind: tok.ValueKind(), off: uint32(tok.Off), end: uint32(end)})
	}
}

// addString puts a string on the tape: one without escapes aliases the
// input, the others are copied unescaped to d.strs.
func (d *Document) addString(tok Token, end int) {
	n := node{kind: String, off: uint32(tok.Off), end: uint32(end)}
	if !tok.InChunk {
		n.flags = flagEscaped
		n.bits = uint64(len(tok.Str))<<32 | uint64(len(d.strs))
		d.strs = append(d.strs, tok.Str...)
	}
	d.nodes = append(d.nodes, n)
}

// reserve sizes the tape for data before parsing, so even a document
// bigger than any the pooled tape has seen is parsed with one allocation
// instead of a chain of doublings. Every node but the root follows one
// structural byte: '[' (a first element), '{' (a first key), ':' (a
// member's value) or ',' (any later one); they are counted with the
// vectorized bytes.Count, which makes the estimate an upper bound. (It
// used to count only '[' and ',', so an object-heavy body — 10^5 members
// in one instance — regrew the tape by doubling: 37× its size allocated
// instead of 13×.) Those bytes inside strings can only inflate the
// estimate up to one node per two bytes, which a dense integer list
// ("0,0,0,…") legitimately reaches.
func (d *Document) reserve(data []byte, maxNodes int64) {
	if len(data) < 4096 {
		return
	}
	est := int64(1)
	for _, c := range []byte("[{:,") {
		est += int64(bytes.Count(data, []byte{c}))
	}
	est = min(est, int64(len(data)/2+1), maxNodes)
	if int64(cap(d.nodes)) < est {
		d.nodes = make([]node, 0, est)
	}
}

// addChild counts a new array element (object members are counted at
// their key).
func (d *Document) addChild() {
	if k := len(d.frames); k > 0 {
		f := &d.frames[k-1]
		if d.nodes[f.node].kind == Array {
			f.count++
		}
	}
}

// SkipSpace returns the offset of the first byte from data[p] that is not
// JSON whitespace (len(data) if none).
func SkipSpace(data []byte, p int) int {
	for p < len(data) {
		switch data[p] {
		case ' ', '\n', '\r', '\t':
			p++
		default:
			return p
		}
	}
	return p
}

// appendUnescaped decodes a string's contents from data[p] up to its
// closing quote as rapidjson 1.1.0 does, appending them to dst, and returns
// the offset after the quote. The error, if any, is rapidjson's, with its
// offset in data: a string that data ends inside of is missing its
// closing quotation mark at len(data), so a streaming reader can call it
// on what it has so far.
func appendUnescaped(dst, data []byte, p int) ([]byte, int, *SyntaxError) {
	n := len(data)
	for {
		if p >= n {
			return dst, p, &SyntaxError{msgMissQuotationMark, p}
		}
		c := data[p]
		switch {
		case c == '"':
			return dst, p + 1, nil
		case c == '\\':
			esc := p
			p++
			var e byte
			if p < n {
				e = data[p]
			}
			if r := unescape[e]; r != 0 {
				dst = append(dst, r)
				p++
				continue
			}
			if e != 'u' {
				return dst, esc, &SyntaxError{msgEscapeInvalid, esc}
			}
			p++
			cp, ok := hex4(data, p)
			if !ok {
				return dst, esc, &SyntaxError{msgUnicodeInvalidHex, esc}
			}
			p += 4
			if cp >= 0xD800 && cp <= 0xDBFF {
				if p+1 >= n || data[p] != '\\' || data[p+1] != 'u' {
					return dst, esc, &SyntaxError{msgSurrogateInvalid, esc}
				}
				p += 2
				cp2, ok := hex4(data, p)
				if !ok {
					return dst, esc, &SyntaxError{msgUnicodeInvalidHex, esc}
				}
				p += 4
				if cp2 < 0xDC00 || cp2 > 0xDFFF {
					return dst, esc, &SyntaxError{msgSurrogateInvalid, esc}
				}
				cp = ((cp-0xD800)<<10 | (cp2 - 0xDC00)) + 0x10000
			}
			dst = appendUTF8(dst, cp)
		case c == 0:
			return dst, p, &SyntaxError{msgMissQuotationMark, p}
		case c < 0x20:
			return dst, p, &SyntaxError{msgEscapeInvalid, p}
		default:
			// Copy the run up to the next byte that needs care; no UTF-8
			// validation, as rapidjson without kParseValidateEncodingFlag.
			q := p + 1
			for q < n && data[q] != '"' && data[q] != '\\' && data[q] >= 0x20 {
				q++
			}
			dst = append(dst, data[p:q]...)
			p = q
		}
	}
}

// unescape maps the byte after a backslash to its meaning (0: not a
// simple escape).
var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 reads the four hex digits of a \u escape at data[p:].
func hex4(data []byte, p int) (uint32, bool) {
	var cp uint32
	for i := 0; i < 4; i++ {
		if p+i >= len(data) {
			return 0, false
		}
		c := data[p+i]
		switch {
		case c >= '0' && c <= '9':
			cp = cp<<4 | uint32(c-'0')
		case c >= 'A' && c <= 'F':
			cp = cp<<4 | uint32(c-'A'+10)
		case c >= 'a' && c <= 'f':
			cp = cp<<4 | uint32(c-'a'+10)
		default:
			return 0, false
		}
	}
	return cp, true
}

// appendUTF8 encodes cp as rapidjson's UTF8::Encode does: lone surrogates
// are encoded as three bytes (invalid UTF-8), which utf8.AppendRune would
// replace with U+FFFD.
func appendUTF8(b []byte, cp uint32) []byte {
	switch {
	case cp <= 0x7F:
		return append(b, byte(cp))
	case cp <= 0x7FF:
		return append(b, byte(0xC0|cp>>6), byte(0x80|cp&0x3F))
	case cp <= 0xFFFF:
		return append(b, byte(0xE0|cp>>12), byte(0x80|(cp>>6)&0x3F), byte(0x80|cp&0x3F))
	default:
		return append(b, byte(0xF0|cp>>18), byte(0x80|(cp>>12)&0x3F), byte(0x80|(cp>>6)&0x3F), byte(0x80|cp&0x3F))
	}
}
