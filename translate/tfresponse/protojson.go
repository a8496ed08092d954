package tfresponse

// protoWriter prints JSON the way protobuf's MessageToJsonString does with
// add_whitespace (json/internal/unparser.cc and writer.cc), which TF
// Serving uses for its GET bodies: one space of indent per level, "key":
// value, "{}" and "[]" for empty containers, a newline after the top-level
// value, and protobuf's own string escaping. Only the few calls the status
// and metadata bodies need exist; the caller writes fields in
// field-number order, as protobuf does.
type protoWriter struct {
	buf   []byte
	first []bool // per open container: nothing written in it yet
}

// open starts an object ('{') or array ('[').
func (p *protoWriter) open(c byte) {
	p.buf = append(p.buf, c)
	p.first = append(p.first, true)
}

// close ends the innermost container with c ('}' or ']').
func (p *protoWriter) close(c byte) {
	n := len(p.first) - 1
	empty := p.first[n]
	p.first = p.first[:n]
	if !empty {
		p.newline()
	}
	p.buf = append(p.buf, c)
}

// next separates a new field or element from the previous one.
func (p *protoWriter) next() {
	n := len(p.first) - 1
	if p.first[n] {
		p.first[n] = false
	} else {
		p.buf = append(p.buf, ',')
	}
	p.newline()
}

func (p *protoWriter) newline() {
	p.buf = append(p.buf, '\n')
	for range len(p.first) {
		p.buf = append(p.buf, ' ')
	}
}

// key starts a field or map entry: `"name": `.
func (p *protoWriter) key(name string) {
	p.next()
	p.str(name)
	p.buf = append(p.buf, ':', ' ')
}

// str writes a quoted string.
func (p *protoWriter) str(s string) { p.buf = appendProtoString(p.buf, s) }

// raw writes an unquoted token (true, false).
func (p *protoWriter) raw(s string) { p.buf = append(p.buf, s...) }

// end finishes the document with protobuf's trailing newline.
func (p *protoWriter) end() []byte {
	p.newline()
	return p.buf
}

// appendProtoString quotes s as protobuf's JSON writer does
// (JsonWriter::WriteEscapedUtf8), which differs from rapidjson: it decodes
// UTF-8, turns each undecodable sequence into one space, escapes '<', '>',
// DEL and C1 controls and a list of invisible code points as lower-case
// \uXXXX (surrogate pairs above U+FFFF), and leaves '/' alone.
func appendProtoString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for len(s) > 0 {
		r, n, ok := consumeScalar(s)
		switch {
		case !ok:
			dst = append(dst, ' ')
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r == '"':
			dst = append(dst, '\\', '"')
		case r == '\f':
			dst = append(dst, '\\', 'f')
		case r == '\b':
			dst = append(dst, '\\', 'b')
		case r == '\\':
			dst = append(dst, '\\', '\\')
		case protoEscapes(r):
			if r < 0x10000 {
				dst = appendUEscape(dst, r)
			} else {
				r -= 0x10000
				dst = appendUEscape(dst, 0xD800+(r>>10))
				dst = appendUEscape(dst, 0xDC00+(r&0x3FF))
			}
		default:
			dst = append(dst, s[:n]...)
		}
		s = s[n:]
	}
	return append(dst, '"')
}

// consumeScalar is protobuf's ConsumeUtf8Scalar: it reads one scalar by
// the lead byte's length without checking for overlong forms or
// surrogates, consuming the offending byte when a continuation byte is
// wrong. ok is false for a failure, n is what was consumed either way.
func consumeScalar(s string) (r rune, n int, ok bool) {
	c := s[0]
	var more int
	switch {
	case c < 0x80:
		return rune(c), 1, true
	case c&0xE0 == 0xC0:
		r, more = rune(c&0x1F), 1
	case c&0xF0 == 0xE0:
		r, more = rune(c&0x0F), 2
	case c&0xF8 == 0xF0:
		r, more = rune(c&0x07), 3
	default:
		return 0, 1, false
	}
	n = 1
	for range more {
		if n == len(s) {
			return 0, n, false
		}
		b := s[n]
		n++
		if b>>6 != 2 {
			return 0, n, false
		}
		r = r<<6 | rune(b&0x3F)
	}
	return r, n, r <= 0x10FFFF
}

// protoEscapes lists what protobuf escapes beyond JSON's requirements
// (writer.cc MustEscape).
func protoEscapes(r rune) bool {
	switch r {
	case '<', '>', 0xFEFF, 0xFFF9, 0xFFFA, 0xFFFB, 0x00AD, 0x06DD, 0x070F, 0x17B4, 0x17B5, 0xE0001:
		return true
	}
	for _, rg := range [...][2]rune{
		{0x0000, 0x001F}, {0x007F, 0x009F}, {0x0600, 0x0603}, {0x200B, 0x200F}, {0x2028, 0x202E},
		{0x2060, 0x2064}, {0x206A, 0x206F}, {0x1D173, 0x1D17A}, {0xE0020, 0xE007F},
	} {
		if rg[0] <= r && r <= rg[1] {
			return true
		}
	}
	return false
}

func appendUEscape(dst []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(dst, '\\', 'u', hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF])
}
