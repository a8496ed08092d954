package jsontext

import (
	"math"
	"strconv"
)

// DumpLimit is how many bytes of a dumped value TF Serving keeps in an
// error message before cutting it off with DumpEllipsis (spec §4.1: "truncated
// after ~256 bytes"; the exact rule could not be read from the pinned
// source, see the package tests).
const DumpLimit = 256

// DumpEllipsis marks a truncated dump.
const DumpEllipsis = "..."

// AppendDump appends v rendered as TF Serving's JsonValueToString renders
// a value in its error messages: rapidjson's PrettyWriter (4-space indent)
// with kFormatSingleLineArray, so arrays stay on one line ("[1, 2]") and
// objects are multi-line; integers as integers; doubles in rapidjson's
// Grisu2 shortest form with ".0" ("1.0", "100.0" for 1e2); strings with
// rapidjson's escaping. rapidjson's writer refuses NaN and Infinity: the
// rendering stops right there (after the separator), so [1, NaN] dumps
// as "[1, " and a bare NaN as "". Output beyond DumpLimit bytes is cut and
// DumpEllipsis appended, and the walk stops early, so dumping a huge
// document costs O(DumpLimit).
func AppendDump(dst []byte, v Value) []byte {
	start := len(dst)
	w := NewWriter(dst)
	w.SetSingleLine(true)
	dumpValue(w, v, start+DumpLimit)
	out := w.Bytes()
	if len(out)-start > DumpLimit {
		out = append(out[:start+DumpLimit], DumpEllipsis...)
	}
	return out
}

// Dump returns AppendDump(nil, v) as a string.
func Dump(v Value) string { return string(AppendDump(nil, v)) }

// dumpValue writes v and reports whether the walk may continue (false after
// a NaN/Inf or once the output passed limit).
func dumpValue(w *Writer, v Value, limit int) bool {
	if len(w.buf) > limit {
		return false
	}
	n := &v.d.nodes[v.i]
	switch n.kind {
	case Null:
		w.Raw([]byte("null"))
	case False:
		w.Bool(false)
	case True:
		w.Bool(true)
	case String:
		w.StringBytes(v.Str())
	case Number:
		switch {
		case n.flags&flagDouble != 0:
			f := math.Float64frombits(n.bits)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				w.Raw(nil) // the separator is written, the value is not
				return false
			}
			var tmp [32]byte
			w.Raw(appendGrisu(tmp[:0], f))
		case n.flags&flagNeg != 0:
			w.Int64(int64(n.bits))
		default:
			w.Uint64(n.bits)
		}
	case Array:
		w.StartArray()
		e, _ := v.First()
		for i, c := 0, v.Len(); i < c; i++ {
			if !dumpValue(w, e, limit) {
				return false
			}
			e = e.Next()
		}
		w.EndArray()
	case Object:
		w.StartObject()
		k, _ := v.First()
		for i, c := 0, v.Len(); i < c; i++ {
			if len(w.buf) > limit {
				return false
			}
			w.Key(string(k.Str()))
			val := k.Next()
			if !dumpValue(w, val, limit) {
				return false
			}
			k = val.Next()
		}
		w.EndObject()
	}
	return true
}

// appendGrisu appends f as rapidjson 1.1.0's Writer::Double writes a
// finite double (internal::dtoa with maxDecimalPlaces 324).
func appendGrisu(dst []byte, f float64) []byte {
	if f == 0 {
		if math.Signbit(f) {
			dst = append(dst, '-')
		}
		return append(dst, "0.0"...)
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
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
	case length == 1:
		dst = append(dst, digits[0], 'e')
		return strconv.AppendInt(dst, int64(kk-1), 10)
	default:
		dst = append(dst, digits[0], '.')
		dst = append(dst, digits[1:]...)
		dst = append(dst, 'e')
		return strconv.AppendInt(dst, int64(kk-1), 10)
	}
}
