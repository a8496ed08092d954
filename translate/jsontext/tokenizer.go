package jsontext

import "errors"

// Tokenizer is rapidjson 1.1.0's reader as a push tokenizer: the parser
// with kParseIterativeFlag | kParseNanAndInfFlag | kParseStopWhenDoneFlag
// from a UTF-8 MemoryStream, as TF Serving calls it (a leading byte-order
// mark skipped, nothing read after the first complete value, NUL ending
// the input, NaN/Inf/Infinity as numbers, raw control characters in
// strings rejected, UTF-8 not validated). Fed chunks of any size, it
// returns tokens one at a time, or NeedMore at a chunk's end, holding a
// token a chunk cuts. It owns rapidjson's states, messages and offsets and
// the bounds, so every reader of JSON here reports a body alike.
type Tokenizer struct {
	lim     Limits
	st      tzState
	objs    []bool // the open containers, true for objects
	bom     int    // byte-order-mark bytes tested so far (0…3)
	pend    []byte // a cut string's or atom's bytes so far
	unesc   []byte // an escaped string's contents
	key     bool   // the pending string is a key
	esc, bs bool   // it has escapes (pend holds its raw text); its last byte is a backslash
	values  int64  // values and keys so far
	off     int64  // text offset of the chunk being read
	tokOff  int64  // text offset of the pending token
	err     error  // sticky: a *SyntaxError or ErrTokenTooLong
}

// tzState is where the tokenizer is between two bytes.
type tzState uint8

const (
	tzStart    tzState = iota // before the root value (byte-order mark, spaces)
	tzValue                   // a value is expected (after ':' or a list's ',')
	tzFirst                   // after '[': a value or ']'
	tzAfter                   // after a value: ',' or the closing bracket
	tzKeyFirst                // after '{': a key or '}'
	tzKey                     // after an object's ',': a key
	tzColon                   // after a key
	tzString                  // inside a string
	tzAtom                    // inside a number or literal
	tzDone                    // the root value is complete; the rest is never read
)

// TokenKind is what a token is.
type TokenKind uint8

// The token kinds. NeedMore is no token: the chunk is read (or Err).
const (
	NeedMore TokenKind = iota
	BeginArray
	BeginObject
	EndArray
	EndObject
	Key
	StringValue
	NumberValue
	NullValue
	TrueValue
	FalseValue
)

// Token is one token. Str (Key, StringValue) holds the unescaped contents:
// in the chunk when InChunk, else in the tokenizer's memory until the next
// call (Own keeps it). A token ends where Next says.
type Token struct {
	Kind    TokenKind
	Off     int64 // text offset of its first byte
	Str     []byte
	InChunk bool
	Num     Num
}

// ValueKind returns the kind of the value a token is or (a bracket) opens.
func (t Token) ValueKind() Kind { return valueKinds[t.Kind] }

// valueKinds maps token kinds to value kinds (Null for the others); a
// TokenKind indexes it without a bounds check.
var valueKinds = [256]Kind{BeginArray: Array, BeginObject: Object, StringValue: String, NumberValue: Number,
	TrueValue: True, FalseValue: False}

// MaxPending bounds a number or literal a chunk boundary cuts; a longer one
// is decided if rapidjson stops inside the bytes held, else fails.
const MaxPending = 4096

// ErrTokenTooLong reports a cut number longer than MaxPending, not held.
var ErrTokenTooLong = errors.New("jsontext: a number token longer than 4096 bytes")

// Reset readies t for a new text within lim, keeping its memory.
func (t *Tokenizer) Reset(lim Limits) {
	*t = Tokenizer{lim: lim.orDefault(), objs: t.objs[:0], pend: t.pend[:0], unesc: t.unesc[:0]}
}

// Err returns the error that ended the text, if any.
func (t *Tokenizer) Err() error { return t.err }

// Done reports that the root value is complete.
func (t *Tokenizer) Done() bool { return t.st == tzDone }

// ValueNext reports that a list's value is expected (after '[' or ',').
func (t *Tokenizer) ValueNext() bool { return t.st == tzValue || t.st == tzFirst }

// ValuesLeft is how many more values and keys the text may hold.
func (t *Tokenizer) ValuesLeft() int64 { return t.lim.MaxValues - t.values }

// Skip records n values (numbers, and sibling lists: "], [") a faster
// path read from the chunk itself in the innermost list, ending after a
// value (after) or where one is expected, first in its list (empty) or not.
func (t *Tokenizer) Skip(n int64, after, empty bool) {
	t.values += n
	switch {
	case after:
		t.st = tzAfter
	case empty:
		t.st = tzFirst
	default:
		t.st = tzValue
	}
}

// EndChunk ends a chunk of n bytes: offsets count on from its end.
func (t *Tokenizer) EndChunk(n int) { t.off += int64(n) }

// Own hands s, the last token's Str, to the caller for good when it lies
// in the tokenizer's memory, which then forgets it; it reports whether.
func (t *Tokenizer) Own(s []byte) bool {
	switch {
	case sameStart(s, t.pend):
		t.pend = nil
	case sameStart(s, t.unesc):
		t.unesc = nil
	default:
		return false
	}
	return true
}

func sameStart(s, buf []byte) bool { return len(s) > 0 && cap(buf) > 0 && &s[0] == &buf[:1][0] }

// fail ends the text with rapidjson's message at chunk offset p.
func (t *Tokenizer) fail(msg string, p int) { t.failAt(msg, t.off+int64(p)) }

func (t *Tokenizer) failAt(msg string, off int64) {
	if t.err == nil {
		t.err = &SyntaxError{Msg: msg, Offset: int(off)}
	}
}

// Next returns the next token of the chunk buf from offset p and the
// offset after it; at the chunk's end, or after an error, NeedMore.
func (t *Tokenizer) Next(buf []byte, p int) (Token, int) {
	n := len(buf)
	for p < n && t.err == nil {
		if t.st >= tzValue && t.st <= tzColon {
			// Between tokens: spaces first.
			if p = SkipSpace(buf, p); p == n {
				break
			}
		}
		switch t.st {
		case tzStart:
			p = t.start(buf, p)
			if p == n || t.bom < 3 {
				return Token{}, n
			}
			switch buf[p] {
			case 0, ']', '}', ',', ':':
				t.fail(msgDocumentEmpty, p)
				return Token{}, p
			}
			return t.value(buf, p)
		case tzValue, tzFirst:
			if buf[p] == ']' {
				if t.st != tzFirst {
					t.fail(msgValueInvalid, p)
					break
				}
				return t.close(false, p), p + 1
			}
			return t.value(buf, p)
		case tzAfter:
			obj := t.objs[len(t.objs)-1]
			switch c := buf[p]; {
			case c == ',':
				p++
				t.st = tzValue
				if obj {
					t.st = tzKey
				}
			case c == ']' && !obj, c == '}' && obj:
				return t.close(obj, p), p + 1
			default:
				t.fail(afterMsg(obj), p)
			}
		case tzKeyFirst, tzKey:
			switch c := buf[p]; {
			case c == '"':
				return t.value(buf, p)
			case c == '}' && t.st == tzKeyFirst:
				return t.close(true, p), p + 1
			default:
				t.fail(msgObjectMissName, p)
			}
		case tzColon:
			if buf[p] != ':' {
				t.fail(msgObjectMissColon, p)
				break
			}
			p++
			t.st = tzValue
		case tzString:
			return t.str(buf, p, true)
		case tzAtom:
			q := atomEnd(buf, p)
			t.pend = append(t.pend, buf[p:q]...)
			if len(t.pend) > MaxPending {
				return t.longAtom(), q
			}
			if q == n {
				return Token{}, q
			}
			return t.atomDone(t.pend), q
		case tzDone:
			// kParseStopWhenDoneFlag: the rest is never read.
			return Token{}, n
		}
	}
	return Token{}, p
}

// End ends the text: a number or literal it ends in is the last token
// (ok); called again, it reports rapidjson's error for a text ending
// before its root value (Err). Past the end rapidjson reads NUL, and so
// does End, but where a value is expected (a NUL would count as one).
func (t *Tokenizer) End() (Token, bool) {
	switch {
	case t.err != nil || t.st == tzDone:
		return Token{}, false
	case t.ValueNext():
		t.failAt(msgValueInvalid, t.off)
		return Token{}, false
	}
	tok, _ := t.Next(nul[:], 0)
	return tok, tok.Kind != NeedMore
}

// nul is what End reads (never written to).
var nul [1]byte

// afterMsg is the error for a byte that is no separator after a value.
func afterMsg(obj bool) string {
	if obj {
		return msgObjectMissComma
	}
	return msgArrayMissComma
}

// start skips the byte-order mark (each of EF BB BF if present, in order,
// as rapidjson's EncodedInputStream; offsets count from the first byte)
// and the spaces before the root.
func (t *Tokenizer) start(buf []byte, p int) int {
	const bom = "\xEF\xBB\xBF"
	for p < len(buf) && t.bom < 3 {
		c := buf[p]
		for t.bom < 3 && c != bom[t.bom] {
			t.bom++
		}
		if t.bom == 3 {
			break
		}
		t.bom++
		p++
	}
	return SkipSpace(buf, p)
}

// value reads the value (or key) starting at buf[p].
func (t *Tokenizer) value(buf []byte, p int) (Token, int) {
	c := buf[p]
	if (c == '[' || c == '{') && len(t.objs) >= t.lim.MaxDepth {
		t.fail(msgTooDeep, p)
		return Token{}, p
	}
	if t.values++; t.values > t.lim.MaxValues { // values and keys
		t.fail(msgTooManyVals, p)
		return Token{}, p
	}
	t.tokOff = t.off + int64(p)
	switch c {
	case '[', '{':
		obj := c == '{'
		t.objs = append(t.objs, obj)
		t.st = tzFirst
		if obj {
			t.st = tzKeyFirst
		}
		return Token{Kind: BeginArray + TokenKind(bitIf(obj)), Off: t.tokOff}, p + 1 // BeginObject follows
	case '"':
		t.key = t.st == tzKeyFirst || t.st == tzKey
		return t.str(buf, p+1, false)
	}
	q := atomEnd(buf, p)
	if q == len(buf) {
		t.pend = append(t.pend[:0], buf[p:]...)
		t.st = tzAtom
		return Token{}, q
	}
	return t.atomDone(buf[p:q]), q
}

// close ends the innermost container at its bracket buf[p].
func (t *Tokenizer) close(obj bool, p int) Token {
	t.objs = t.objs[:len(t.objs)-1]
	t.valueEnd()
	return Token{Kind: EndArray + TokenKind(bitIf(obj)), Off: t.off + int64(p)} // EndObject follows EndArray
}

// valueEnd sets the state after a complete value.
func (t *Tokenizer) valueEnd() {
	t.st = tzAfter
	if len(t.objs) == 0 {
		t.st = tzDone
	}
}

// str reads a string from buf[p], after its opening quote, or with more
// the rest of a cut one; NeedMore when the chunk ends first (or at Err).
func (t *Tokenizer) str(buf []byte, p int, more bool) (Token, int) {
	if more && t.esc {
		return t.strRaw(buf, p)
	}
	q, clean := scanString(buf, p)
	if !more {
		if clean && q < len(buf) {
			return t.strToken(buf[p:q], true), q + 1
		}
		t.pend = t.pend[:0]
		t.st = tzString
	}
	t.pend = append(t.pend, buf[p:q]...)
	if !clean {
		// An escape (or a raw control character): the raw text is kept
		// to the closing quote, then unescaped.
		t.esc, t.bs = true, false
		return t.strRaw(buf, q)
	}
	if q == len(buf) {
		t.esc = false
		return Token{}, q
	}
	tok := t.strToken(t.pend, false)
	t.pend = t.pend[:0]
	return tok, q + 1
}

// strRaw continues a string with escapes, its raw text in pend, to the
// closing quote (one no backslash escapes) or the first raw control
// character, which rapidjson rejects there or at an escape before it.
func (t *Tokenizer) strRaw(buf []byte, p int) (Token, int) {
	start := p
	for ; p < len(buf); p++ {
		c := buf[p]
		switch {
		case c < 0x20:
			t.pend = append(t.pend, buf[start:p+1]...)
			return t.strEnd(), p
		case t.bs:
			t.bs = false
		case c == '\\':
			t.bs = true
		case c == '"':
			t.pend = append(t.pend, buf[start:p+1]...)
			return t.strEnd(), p + 1
		}
	}
	t.pend = append(t.pend, buf[start:]...)
	return Token{}, p
}

// strEnd unescapes the raw string in pend (with its closing quote if it
// has one) as rapidjson does, or fails with its error (NeedMore).
func (t *Tokenizer) strEnd() Token {
	t.esc = false
	out, _, err := appendUnescaped(t.unesc[:0], t.pend, 0)
	t.unesc = out
	t.pend = t.pend[:0]
	if err != nil {
		t.failAt(err.Msg, t.tokOff+1+int64(err.Offset))
		return Token{}
	}
	return t.strToken(out, false)
}

func (t *Tokenizer) strToken(s []byte, inChunk bool) Token {
	tok := Token{Kind: Key, Off: t.tokOff, Str: s, InChunk: inChunk}
	if t.key {
		t.st = tzColon
		return tok
	}
	t.valueEnd()
	tok.Kind = StringValue
	return tok
}

// scanString returns the offset of the closing quote (len(buf) when the
// chunk ends first); clean is false at an escape or a raw control
// character.
func scanString(buf []byte, p int) (int, bool) {
	for ; p < len(buf); p++ {
		c := buf[p]
		if c == '"' {
			return p, true
		}
		if c == '\\' || c < 0x20 {
			return p, false
		}
	}
	return p, true
}

// atomEnd returns the end of the bytes a number or literal is made of.
func atomEnd(buf []byte, p int) int {
	for ; p < len(buf); p++ {
		if c := buf[p]; c-'0' >= 10 && c|0x20-'a' >= 26 && c != '-' && c != '+' && c != '.' {
			break
		}
	}
	return p
}

// longAtom decides a cut token longer than MaxPending where rapidjson
// stops inside what is held, else fails with ErrTokenTooLong.
func (t *Tokenizer) longAtom() Token {
	tok := t.pend
	_, end, err := parseNumber(tok, 0)
	if c := tok[0]; c != 'n' && c != 't' && c != 'f' &&
		(err == nil && end == len(tok) || err != nil && err.Offset >= len(tok)) {
		t.err = ErrTokenTooLong
		return Token{}
	}
	// The root's trailing bytes are never read: tzDone skips them.
	return t.atomDone(tok)
}

// atomDone reads a complete number or literal as rapidjson does (a
// literal byte by byte, a number by its grammar); bytes left over are a
// next token, which cannot follow a value. At an error, NeedMore.
func (t *Tokenizer) atomDone(tok []byte) Token {
	t.pend = t.pend[:0] // done with, when tok is a cut token held there
	out := Token{Off: t.tokOff}
	var lit string
	if len(tok) > 0 {
		switch tok[0] {
		case 'n':
			lit, out.Kind = "null", NullValue
		case 't':
			lit, out.Kind = "true", TrueValue
		case 'f':
			lit, out.Kind = "false", FalseValue
		}
	}
	end := 0
	if lit != "" {
		for end < len(lit) && end < len(tok) && tok[end] == lit[end] {
			end++
		}
		if end < len(lit) {
			t.failAt(msgValueInvalid, t.tokOff+int64(end))
			return Token{}
		}
	} else {
		var err *SyntaxError
		if out.Num, end, err = parseNumber(tok, 0); err != nil {
			t.failAt(err.Msg, t.tokOff+int64(err.Offset))
			return Token{}
		}
		out.Kind = NumberValue
	}
	if end < len(tok) && len(t.objs) > 0 {
		t.failAt(afterMsg(t.objs[len(t.objs)-1]), t.tokOff+int64(end))
		return Token{}
	}
	t.valueEnd()
	return out
}
