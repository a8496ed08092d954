package tfjson

// AppendBase64 decodes s as abseil's absl::Base64Unescape does
// (docs/tfserving-rest.md §4.6), appending to dst; ok is false where TF
// Serving says "Unable to base64 decode". Written by hand because encoding/base64 is
// stricter: abseil skips ASCII whitespace anywhere, accepts no padding or
// exactly the right amount, takes '.' as a pad character too, and does not
// check the unused low bits of the last quantum. The standard alphabet
// only: '-' and '_' are errors.
func AppendBase64(dst, s []byte) (out []byte, ok bool) {
	var acc uint32
	state := 0 // data characters in the current 4-character quantum
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		v := unbase64[c]
		if v < 0 {
			if isSpace(c) {
				continue
			}
			if c == '=' || c == '.' {
				break
			}
			return dst, false
		}
		acc = acc<<6 | uint32(v)
		state++
		if state == 4 {
			dst = append(dst, byte(acc>>16), byte(acc>>8), byte(acc))
			acc, state = 0, 0
		}
	}
	expectedPads := 0
	switch state {
	case 1:
		return dst, false
	case 2:
		dst = append(dst, byte(acc>>4))
		expectedPads = 2
	case 3:
		dst = append(dst, byte(acc>>10), byte(acc>>2))
		expectedPads = 1
	}
	// The rest may only be whitespace and pad characters, and the pads
	// must number zero or exactly what the last quantum needs.
	pads := 0
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '=' || c == '.':
			pads++
		case !isSpace(c):
			return dst, false
		}
	}
	return dst, pads == 0 || pads == expectedPads
}

// isSpace is absl::ascii_isspace.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// unbase64 maps the standard alphabet to 0…63 and everything else to -1.
var unbase64 = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = int8(i)
	}
	return t
}()
