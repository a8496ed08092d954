package oip

import (
	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// ParseHeaderLength parses an Inference-Header-Content-Length value of a
// response whose body is bodyLen bytes long: the length of the JSON part,
// the binary blocks following it. Only ASCII digits are accepted (optional
// surrounding spaces aside), and 0 < n <= bodyLen: 0 is Triton's raw binary
// form, which tfsbridge never asks for, so in a response it is an error.
func ParseHeaderLength(value string, bodyLen int) (int, error) {
	s := trimOWS(value)
	if s == "" {
		return 0, badHeaderLength(value, "empty")
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, badHeaderLength(value, "not a decimal number")
		}
		if n > (maxInt-int(c-'0'))/10 {
			return 0, badHeaderLength(value, "out of range")
		}
		n = n*10 + int(c-'0')
	}
	if n == 0 {
		return 0, badHeaderLength(value, "0 announces a raw binary body, which was not requested")
	}
	if n > bodyLen {
		return 0, apierr.Errorf(apierr.BadGateway,
			"invalid response from inference server: Inference-Header-Content-Length %d exceeds the body length %d", n, bodyLen)
	}
	return n, nil
}

const maxInt = int(^uint(0) >> 1)

// trimOWS drops HTTP optional white space (spaces and tabs).
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

func badHeaderLength(value, why string) *apierr.Error {
	return apierr.Errorf(apierr.BadGateway,
		"invalid response from inference server: Inference-Header-Content-Length %q: %s", clip(value, 32), why)
}
