package route

import "strings"

// Request-target syntax and percent-decoding, written by hand because both
// must match two C libraries byte for byte rather than Go's net/url, which
// is stricter in some places (url.PathUnescape fails on "%zz") and looser in
// others (it accepts bytes that libevent refuses).

// uriChar marks the bytes libevent's strict URI parser (end_of_path in
// http.c) accepts literally in a path, query or fragment: RFC 3986
// unreserved, sub-delims, ":", "@" and "/". "%" is accepted only as the
// start of "%XX"; "?" only in the query and fragment.
var uriChar = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/") {
		t[c] = true
	}
	return t
}()

// invalidTargetByte returns the index of the first byte that makes libevent
// refuse the request target (TF Serving then answers 400 before routing),
// or -1 when the target is acceptable. The target is path ["?" query]
// ["#" fragment]; the first "?" opens the query and the first "#" the
// fragment, after which a further "#" is invalid.
func invalidTargetByte(target string) int {
	fragment := false
	for i := 0; i < len(target); {
		c := target[i]
		switch {
		case uriChar[c]:
			i++
		case c == '%' && i+2 < len(target) && isHex(target[i+1]) && isHex(target[i+2]):
			i += 3
		case c == '?':
			// Ends the path or, later, is an ordinary query/fragment byte.
			i++
		case c == '#' && !fragment:
			fragment = true
			i++
		default:
			return i
		}
	}
	return -1
}

// unescape percent-decodes s as libcurl's curl_easy_unescape does, which is
// what TF Serving applies to model names and labels: "%XX" (either hex
// case) becomes one byte, anything else, including "+" and a "%" without
// two hex digits after it, is kept as is. It cannot fail.
func unescape(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s // the common case: no allocation
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			c = unhex(s[i+1])<<4 | unhex(s[i+2])
			i += 2
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unhex returns the value of a hex digit already checked by isHex.
func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
