package jsontext

import "unicode/utf8"

// SkipSpace returns the offset of the first byte from data[p] that is not
// JSON whitespace (len(data) if none).
func SkipSpace(data []byte, p int) int {
	for p < len(data) && (data[p] == ' ' || data[p] == '\n' || data[p] == '\r' || data[p] == '\t') {
		p++
	}
	return p
}

// appendUnescaped appends a string's contents from data[p] to its closing
// quote, unescaped as rapidjson 1.1.0 does, and returns the offset after
// the quote, or rapidjson's error with its offset in data (a string data
// ends inside of misses its closing quotation mark at len(data)).
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

// unescape maps the byte after a backslash to its meaning (0: no simple escape).
var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 reads the four hex digits of a \u escape at data[p:].
func hex4(data []byte, p int) (uint32, bool) {
	if p+4 > len(data) {
		return 0, false
	}
	var cp uint32
	for _, c := range data[p : p+4] {
		switch {
		case isDigit(c):
			cp = cp<<4 | uint32(c-'0')
		case c|0x20 >= 'a' && c|0x20 <= 'f': // A-F or a-f
			cp = cp<<4 | uint32(c|0x20-'a'+10)
		default:
			return 0, false
		}
	}
	return cp, true
}

// appendUTF8 encodes cp as rapidjson's UTF8::Encode: a lone surrogate as
// three bytes (invalid UTF-8), which utf8.AppendRune would replace.
func appendUTF8(b []byte, cp uint32) []byte {
	if cp < 0xD800 || cp > 0xDFFF {
		return utf8.AppendRune(b, rune(cp))
	}
	return append(b, byte(0xE0|cp>>12), byte(0x80|(cp>>6)&0x3F), byte(0x80|cp&0x3F))
}
