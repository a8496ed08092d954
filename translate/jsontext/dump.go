package jsontext

import (
	"math"
	"strconv"
)

// DumpLimit is the output size at which TF Serving's error-message writer
// (JsonValueToDebugString over JsonWriterWithLimit, 2.18+) stops writing
// tokens (docs/tfserving-rest.md §4.1).
//
// A dump (DumpStream) renders a value as TF Serving's JsonValueToString
// does in its error messages: rapidjson's PrettyWriter (4-space indent)
// with kFormatSingleLineArray ("[1, 2]" on one line, objects multi-line),
// integers as integers, doubles in Grisu2 form with ".0" ("100.0" for
// 1e2), rapidjson's string escaping. Its writer refuses NaN and Infinity:
// the rendering stops after the separator ([1, NaN] dumps as "[1, ").
//
// The limit works token by token, as TF's limited writer: a token (a
// bracket, key or scalar) is written whole with its prefix, however long,
// if the output so far is shorter than DumpLimit; after that nothing, no
// closing brackets. So a dump is a prefix of the full rendering cut at a
// token boundary, and feeding it more costs nothing.
const DumpLimit = 256

// appendGrisu appends f as rapidjson 1.1.0's Writer::Double writes a
// finite double (internal::dtoa with maxDecimalPlaces 324).
func appendGrisu(dst []byte, f float64) []byte {
	if math.Signbit(f) {
		dst = append(dst, '-')
		f = -f
	}
	if f == 0 {
		return append(dst, "0.0"...)
	}
	var buf [26]byte
	length, k := grisu2(f, buf[:])
	return prettify(dst, buf[:length], k)
}

// prettify is rapidjson's internal::Prettify for maxDecimalPlaces 324
// (Writer::Double's default, with which its truncation branches cannot
// trigger for a double): digits × 10^k laid out as an integer with ".0", a
// plain decimal, or d.ddde±x with an unsigned-positive exponent ("1e30",
// "1.5e-7").
func prettify(dst, digits []byte, k int) []byte {
	length := len(digits)
	kk := length + k // 10^(kk-1) <= v < 10^kk
	switch {
	case k >= 0 && kk <= 21:
		dst = append(dst, digits...)
		for i := length; i < kk; i++ {
			dst = append(dst, '0')
		}
		return append(dst, '.', '0')
	case kk > 0 && kk <= 21:
		dst = append(dst, digits[:kk]...)
		dst = append(dst, '.')
		return append(dst, digits[kk:]...)
	case kk > -6 && kk <= 0:
		dst = append(dst, '0', '.')
		for i := kk; i < 0; i++ {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	default: // "d.ddde±x", or "de±x" for one digit
		dst = append(dst, digits[0])
		if length > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		return strconv.AppendInt(dst, int64(kk-1), 10)
	}
}
