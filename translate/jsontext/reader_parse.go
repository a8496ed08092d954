package jsontext

import (
	"bytes"
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

// parseState is rapidjson's IterativeParsingState (the subset reachable
// with the flags TF Serving uses). Error offsets and messages depend on it.
type parseState uint8

const (
	stStart parseState = iota
	stFinish
	stObjectInitial
	stMemberKey
	stKeyValueDelimiter
	stMemberValue
	stMemberDelimiter
	stArrayInitial
	stElement
	stElementDelimiter
)

// frame is an open container: its node and the state to resume in its
// parent once it closes.
type frame struct {
	node  uint32
	count uint32
	ret   parseState
}

// maxInput keeps offsets in 32 bits.
const maxInput = math.MaxUint32 - 1

func (d *Document) reset(data []byte) {
	d.data = data
	d.nodes = d.nodes[:0]
	d.strs = d.strs[:0]
	d.frames = d.frames[:0]
	d.nNum, d.nStr = 0, 0
}

// parse runs rapidjson's iterative parser (IterativeParse with
// kParseStopWhenDoneFlag) over data, building the tape.
func (d *Document) parse(data []byte, lim Limits) error {
	d.reset(data)
	if len(data) > maxInput {
		return &SyntaxError{msgTooLarge, 0}
	}
	maxNodes := lim.MaxValues
	d.reserve(data, maxNodes)
	n := len(data)
	p := skipBOM(data)
	p = skipWS(data, p)
	state := stStart
	for p < n && data[p] != 0 {
		c := data[p]
		switch state {
		case stStart, stKeyValueDelimiter, stArrayInitial, stElementDelimiter:
			// A value is expected.
			var ret parseState
			switch state {
			case stStart:
				ret = stFinish
			case stKeyValueDelimiter:
				ret = stMemberValue
			default:
				ret = stElement
			}
			switch c {
			case '[', '{':
				if len(d.frames) >= lim.MaxDepth {
					return &SyntaxError{msgTooDeep, p}
				}
				if int64(len(d.nodes)) >= maxNodes {
					return &SyntaxError{msgTooManyVals, p}
				}
				d.addChild()
				k, st := Array, stArrayInitial
				if c == '{' {
					k, st = Object, stObjectInitial
				}
				d.frames = append(d.frames, frame{node: uint32(len(d.nodes)), ret: ret})
				d.nodes = append(d.nodes, node{kind: k, off: uint32(p)})
				p++
				state = st
			case ']':
				if state == stArrayInitial {
					p = d.closeContainer(p)
					state = d.popFrame()
				} else {
					return errorFor(state, p)
				}
			case '}', ',', ':':
				return errorFor(state, p)
			default:
				if int64(len(d.nodes)) >= maxNodes {
					return &SyntaxError{msgTooManyVals, p}
				}
				d.addChild()
				var err *SyntaxError
				if p, err = d.parseScalar(p); err != nil {
					return err
				}
				state = ret
			}
		case stObjectInitial, stMemberDelimiter:
			switch c {
			case '"':
				if int64(len(d.nodes)) >= maxNodes {
					return &SyntaxError{msgTooManyVals, p}
				}
				d.frames[len(d.frames)-1].count++
				var err *SyntaxError
				if p, err = d.parseString(p, true); err != nil {
					return err
				}
				state = stMemberKey
			case '}':
				if state == stMemberDelimiter {
					return errorFor(state, p)
				}
				p = d.closeContainer(p)
				state = d.popFrame()
			default:
				return errorFor(state, p)
			}
		case stMemberKey:
			if c != ':' {
				return errorFor(state, p)
			}
			p++
			state = stKeyValueDelimiter
		case stMemberValue, stElement:
			switch {
			case c == ',':
				p++
				if state == stElement {
					state = stElementDelimiter
				} else {
					state = stMemberDelimiter
				}
			case c == ']' && state == stElement, c == '}' && state == stMemberValue:
				p = d.closeContainer(p)
				state = d.popFrame()
			default:
				return errorFor(state, p)
			}
		}
		if state == stFinish {
			return nil
		}
		p = skipWS(data, p)
	}
	return errorFor(state, p)
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

// errorFor is rapidjson's HandleError: the message depends only on the
// state the unexpected token (or the end of input) was met in.
func errorFor(state parseState, p int) *SyntaxError {
	switch state {
	case stStart:
		return &SyntaxError{msgDocumentEmpty, p}
	case stObjectInitial, stMemberDelimiter:
		return &SyntaxError{msgObjectMissName, p}
	case stMemberKey:
		return &SyntaxError{msgObjectMissColon, p}
	case stMemberValue:
		return &SyntaxError{msgObjectMissComma, p}
	case stKeyValueDelimiter, stArrayInitial, stElementDelimiter:
		return &SyntaxError{msgValueInvalid, p}
	default:
		return &SyntaxError{msgArrayMissComma, p}
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

// closeContainer finishes the innermost container at its closing bracket
// data[p] and returns the offset after it.
func (d *Document) closeContainer(p int) int {
	f := d.frames[len(d.frames)-1]
	nd := &d.nodes[f.node]
	nd.end = uint32(p + 1)
	nd.bits = uint64(f.count)<<32 | uint64(len(d.nodes))
	return p + 1
}

// popFrame drops the innermost container and returns the state to resume.
func (d *Document) popFrame() parseState {
	k := len(d.frames) - 1
	ret := d.frames[k].ret
	d.frames = d.frames[:k]
	return ret
}

// skipBOM is the constructor of rapidjson's EncodedInputStream<UTF8<>,
// MemoryStream>, the stream TF Serving parses from: it drops the bytes EF,
// BB and BF, each only if present, in that order. Offsets still count from
// the first byte (MemoryStream::Tell).
func skipBOM(data []byte) int {
	p := 0
	for _, b := range [...]byte{0xEF, 0xBB, 0xBF} {
		if p < len(data) && data[p] == b {
			p++
		}
	}
	return p
}

func skipWS(data []byte, p int) int {
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

// parseScalar parses a string, literal or number value at data[p]
// (rapidjson's ParseValue for non-container tokens).
func (d *Document) parseScalar(p int) (int, *SyntaxError) {
	data := d.data
	switch data[p] {
	case '"':
		d.nStr++
		return d.parseString(p, false)
	case 'n':
		return d.parseLiteral(p, "null", Null)
	case 't':
		return d.parseLiteral(p, "true", True)
	case 'f':
		return d.parseLiteral(p, "false", False)
	}
	end, flags, bits, err := parseNumber(data, p)
	if err != nil {
		return end, err
	}
	d.nNum++
	d.nodes = append(d.nodes, node{kind: Number, flags: flags, off: uint32(p), end: uint32(end), bits: bits})
	return end, nil
}

// parseLiteral matches null/true/false byte by byte; the error offset is
// where the first mismatch is (rapidjson's Consume chain).
func (d *Document) parseLiteral(p int, lit string, k Kind) (int, *SyntaxError) {
	start := p
	data := d.data
	for i := 0; i < len(lit); i++ {
		if p >= len(data) || data[p] != lit[i] {
			return p, &SyntaxError{msgValueInvalid, p}
		}
		p++
	}
	d.nodes = append(d.nodes, node{kind: k, off: uint32(start), end: uint32(p)})
	return p, nil
}

// parseString parses the string starting at the quote data[p]. Strings
// without escapes alias the input; the others are unescaped into d.strs.
func (d *Document) parseString(p int, key bool) (int, *SyntaxError) {
	_ = key
	data := d.data
	start := p
	p++
	for p < len(data) {
		c := data[p]
		if c == '"' {
			d.nodes = append(d.nodes, node{kind: String, off: uint32(start), end: uint32(p + 1)})
			return p + 1, nil
		}
		if c == '\\' || c < 0x20 {
			return d.parseEscapedString(start, p)
		}
		p++
	}
	return p, &SyntaxError{msgMissQuotationMark, p}
}

// parseEscapedString continues parseString at data[p], the first byte that
// needs care, copying the unescaped contents to d.strs.
func (d *Document) parseEscapedString(start, p int) (int, *SyntaxError) {
	sOff := len(d.strs)
	d.strs = append(d.strs, d.data[start+1:p]...)
	var err *SyntaxError
	d.strs, p, err = AppendUnescaped(d.strs, d.data, p)
	if err != nil {
		return err.Offset, err
	}
	d.nodes = append(d.nodes, node{kind: String, flags: flagEscaped, off: uint32(start), end: uint32(p),
		bits: uint64(len(d.strs)-sOff)<<32 | uint64(sOff)})
	return p, nil
}

// AppendUnescaped decodes a string's contents from data[p] up to its
// closing quote as rapidjson 1.1.0 does, appending them to dst, and returns
// the offset after the quote. The error, if any, is rapidjson's, with its
// offset in data: a string that data ends inside of is missing its
// closing quotation mark at len(data), so a streaming reader can call it
// on what it has so far.
func AppendUnescaped(dst, data []byte, p int) ([]byte, int, *SyntaxError) {
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
