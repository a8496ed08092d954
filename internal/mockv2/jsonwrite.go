package mockv2

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// Responses whose layout matters byte for byte (infer responses: key order,
// bare NaN tokens, each server's float format) are written with the
// helpers below; everything else (metadata, configs, error objects) goes
// through encoding/json with struct field order.

// marshal encodes v compactly with encoding/json but without HTML escaping
// (no server imitated here writes "<" as \u003c) and without the trailing
// newline of an Encoder.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only the mock's own fixed types are marshalled; a failure is a
		// programming error, answered as an opaque value.
		return []byte("null")
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// appendJSONString appends s as a JSON string the way rapidjson's Writer
// (upper-case hex) or Python/orjson (lower-case hex) escapes it: quotes,
// backslashes and control characters only; other bytes, including invalid
// UTF-8, pass through untouched, as Triton does for BYTES outputs.
func appendJSONString(dst []byte, s []byte, upperHex bool) []byte {
	hexDigits := "0123456789abcdef"
	if upperHex {
		hexDigits = "0123456789ABCDEF"
	}
	dst = append(dst, '"')
	for _, c := range s {
		switch {
		case c == '"':
			dst = append(dst, '\\', '"')
		case c == '\\':
			dst = append(dst, '\\', '\\')
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// decimalDigits splits a positive finite f into its shortest round-trip
// decimal digits and the exponent X of the first digit (f = d.ddd × 10^X).
func decimalDigits(f float64) (digits string, exp int) {
	s := strconv.FormatFloat(f, 'e', -1, 64) // "d.ddde±XX"
	e := bytes.IndexByte([]byte(s), 'e')
	mant := s[:e]
	exp, _ = strconv.Atoi(s[e+1:])
	if len(mant) > 1 {
		digits = mant[:1] + mant[2:]
	} else {
		digits = mant
	}
	return digits, exp
}

// appendRapidDouble appends f as rapidjson's Writer::Double with
// kWriteNanAndInfFlag prints it (Triton): shortest digits laid out by
// rapidjson's Prettify, bare NaN/Infinity/-Infinity tokens.
func appendRapidDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	if math.Signbit(f) {
		dst = append(dst, '-')
		f = -f
	}
	if f == 0 {
		return append(dst, "0.0"...)
	}
	digits, x := decimalDigits(f)
	n := len(digits)
	k := x - n + 1 // f = digits × 10^k
	kk := n + k    // position of the decimal point
	switch {
	case k >= 0 && kk <= 21:
		dst = append(dst, digits...)
		for range k {
			dst = append(dst, '0')
		}
		return append(dst, ".0"...)
	case kk > 0 && kk <= 21:
		dst = append(dst, digits[:kk]...)
		dst = append(dst, '.')
		return append(dst, digits[kk:]...)
	case kk > -6 && kk <= 0:
		dst = append(dst, "0."...)
		for range -kk {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	dst = append(dst, digits[0])
	if n > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	return strconv.AppendInt(dst, int64(kk-1), 10)
}

// appendPyFloat appends f as Python's repr (and orjson) prints a float, or
// null for NaN and infinities, which KServe and MLServer emit instead of
// the non-standard tokens. Fixed notation for 1e-4 <= |f| < 1e16 with
// ".0" on whole numbers, else d.ddde±XX.
func appendPyFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if math.Signbit(f) {
		dst = append(dst, '-')
		f = -f
	}
	if f == 0 {
		return append(dst, "0.0"...)
	}
	digits, x := decimalDigits(f)
	n := len(digits)
	if x < -4 || x >= 16 {
		dst = append(dst, digits[0])
		if n > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if x < 0 {
			dst = append(dst, '-')
			x = -x
		} else {
			dst = append(dst, '+')
		}
		if x < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(x), 10)
	}
	if x < 0 {
		dst = append(dst, "0."...)
		for range -x - 1 {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	if n <= x+1 {
		dst = append(dst, digits...)
		for range x + 1 - n {
			dst = append(dst, '0')
		}
		return append(dst, ".0"...)
	}
	dst = append(dst, digits[:x+1]...)
	dst = append(dst, '.')
	return append(dst, digits[x+1:]...)
}

// appendShape appends a JSON integer array.
func appendShape(dst []byte, shape []int64) []byte {
	dst = append(dst, '[')
	for i, d := range shape {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, d, 10)
	}
	return append(dst, ']')
}

// dimsString is Triton's DimsListToString: "[-1,16]".
func dimsString(shape []int64) string { return string(appendShape(nil, shape)) }

// pyTuple is numpy's text for a shape in error messages: "(1,16)", "(3,)".
func pyTuple(shape []int64) string {
	b := []byte{'('}
	for i, d := range shape {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	if len(shape) == 1 {
		b = append(b, ',')
	}
	return string(append(b, ')'))
}

// pyBytesRepr is Python's repr of a bytes object, for error texts that
// embed one (b'\xff').
func pyBytesRepr(b []byte) string {
	out := []byte("b'")
	const hexDigits = "0123456789abcdef"
	for _, c := range b {
		switch {
		case c == '\\' || c == '\'':
			out = append(out, '\\', c)
		case c == '\t':
			out = append(out, '\\', 't')
		case c == '\n':
			out = append(out, '\\', 'n')
		case c == '\r':
			out = append(out, '\\', 'r')
		case c < 0x20 || c >= 0x7F:
			out = append(out, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xF])
		default:
			out = append(out, c)
		}
	}
	return string(append(out, '\''))
}
