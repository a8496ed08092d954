package jsontext

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
)

// Number parsing is rapidjson 1.1.0's GenericReader::ParseNumber with
// kParseNanAndInfFlag, without kParseFullPrecisionFlag, quirks included:
// the significand accumulated in 32, then 64 bits, then a double; fraction
// digits past ~17 significant ones dropped; one multiply or divide by a
// power of ten ("normal precision", not correctly rounded). TF Serving
// stores that double (or it cast to float), so strconv.ParseFloat would
// differ in the last bit for some 16+ digit inputs. No allocation, no
// big-number arithmetic: the request benchmark's fast path.

// The number flags, mirroring rapidjson's kIntFlag … kDoubleFlag: an
// integer token carries every range flag it fits.
const (
	flagInt    uint8 = 1 << iota // fits int32
	flagUint                     // fits uint32
	flagInt64                    // fits int64
	flagUint64                   // fits uint64
	flagDouble                   // not an integer token
	flagNeg                      // a negative integer (bits hold int64)
)

// quietNaN is C's quiet_NaN(); Go's math.NaN() has another payload bit.
var quietNaN = math.Float64frombits(0x7FF8000000000000)

// pow10 is rapidjson's internal::Pow10 table, 1e0 … 1e308 correctly
// rounded as C++ literals are (math.Pow10 is not always).
var pow10 = func() (t [309]float64) {
	for i := range t {
		t[i], _ = strconv.ParseFloat("1e"+strconv.Itoa(i), 64)
	}
	return t
}()

// Error messages of rapidjson 1.1.0 (error/en.h) used by the reader.
const (
	msgDocumentEmpty      = "The document is empty."
	msgValueInvalid       = "Invalid value."
	msgObjectMissName     = "Missing a name for object member."
	msgObjectMissColon    = "Missing a colon after a name of object member."
	msgObjectMissComma    = "Missing a comma or '}' after an object member."
	msgArrayMissComma     = "Missing a comma or ']' after an array element."
	msgUnicodeInvalidHex  = "Incorrect hex digit after \\u escape in string."
	msgSurrogateInvalid   = "The surrogate pair in string is invalid."
	msgEscapeInvalid      = "Invalid escape character in string."
	msgMissQuotationMark  = "Missing a closing quotation mark in string."
	msgNumberTooBig       = "Number too big to be stored in double."
	msgNumberMissFraction = "Miss fraction part in number."
	msgNumberMissExponent = "Miss exponent in number."
	// Not rapidjson's: tfsbridge's own bounds (rapidjson has none).
	msgTooDeep     = "Document nests deeper than the limit."
	msgTooManyVals = "Document holds more values than the limit."
)

func isDigit(c byte) bool { return c-'0' < 10 }

// parseNumber parses the number token at data[p] and returns it with the
// offset after it, or rapidjson's error and offset. Past the end of data
// the stream reads as NUL, like rapidjson's MemoryStream.
func parseNumber(data []byte, p int) (num Num, end int, err *SyntaxError) {
	start := p
	n := len(data)
	peek := func(i int) byte {
		if i < n {
			return data[i]
		}
		return 0
	}
	consume := func(c byte) bool {
		if peek(p) == c {
			p++
			return true
		}
		return false
	}

	minus := consume('-')
	var i uint64
	sig := 0
	d := 0.0
	useDouble := false
	nanOrInf := false

	switch c := peek(p); {
	case c == '0':
		p++
	case c >= '1' && c <= '9':
		i = uint64(c - '0')
		p++
		// On in a double where the next digit would pass int64's range
		// (negative) or uint64's; one 64-bit loop stands for rapidjson's
		// 32-bit first stage too (same value).
		lim, last := uint64(0x1999999999999999), byte('5')
		if minus {
			lim, last = 0x0CCCCCCCCCCCCCCC, '8'
		}
		for p < n && isDigit(data[p]) {
			if i >= lim && (i != lim || data[p] > last) {
				d, useDouble = float64(i), true
				break
			}
			i = i*10 + uint64(data[p]-'0')
			p++
			sig++
		}
	case c == 'I' || c == 'N':
		// Sequential consumes, as rapidjson: a failed "NaN" falls through
		// to trying "Inf" at wherever it stopped.
		nanOrInf = true
		if consume('N') && consume('a') && consume('N') {
			d = quietNaN
		} else if consume('I') && consume('n') && consume('f') {
			d = math.Inf(1)
			if minus {
				d = math.Inf(-1)
			}
			if peek(p) == 'i' && !(consume('i') && consume('n') && consume('i') && consume('t') && consume('y')) {
				return Num{}, p, &SyntaxError{msgValueInvalid, p}
			}
		} else {
			return Num{}, p, &SyntaxError{msgValueInvalid, p}
		}
	default:
		return Num{}, p, &SyntaxError{msgValueInvalid, p}
	}

	if useDouble {
		for p < n && isDigit(data[p]) {
			if d >= 1.7976931348623157e307 {
				return Num{}, p, &SyntaxError{msgNumberTooBig, start}
			}
			// The explicit conversion forbids a fused multiply-add, which
			// C++ (SSE2) does not use either.
			d = float64(d*10) + float64(data[p]-'0')
			p++
		}
	}

	expFrac := 0
	if consume('.') {
		if !isDigit(peek(p)) {
			return Num{}, p, &SyntaxError{msgNumberMissFraction, p}
		}
		// Digits go into the integer significand while it is at most
		// 2^53-1 (eight at once while none can meet that), each lowering
		// expFrac and, from the first non-zero one, counting in sig; then
		// into the double up to 17 significant digits; the rest dropped.
		for !useDouble && i < 0x1FFFFFFFFFFFFF/100000000 && p+8 <= n {
			x := binary.LittleEndian.Uint64(data[p:])
			k := digitRun(x)
			if k == 0 {
				break
			}
			v := digitsValue(x, k)
			if i != 0 {
				sig += k
			} else if v != 0 {
				// Less the run's leading zeros (the first digit is in the
				// low byte; a non-zero one is in the run).
				sig += k - bits.TrailingZeros64(x&0x0F0F0F0F0F0F0F0F)>>3
			}
			i = i*pow10u[k] + v
			p += k
			expFrac -= k
			if k < 8 {
				break
			}
		}
		for ; !useDouble && p < n && isDigit(data[p]) && i <= 0x1FFFFFFFFFFFFF; p++ {
			i = i*10 + uint64(data[p]-'0')
			expFrac--
			if i != 0 {
				sig++
			}
		}
		if !useDouble {
			d, useDouble = float64(i), true
		}
		for ; p < n && isDigit(data[p]); p++ {
			if sig < 17 {
				// The explicit conversion forbids a fused multiply-add.
				d = float64(d*10) + float64(data[p]-'0')
				expFrac--
				if d > 0 {
					sig++
				}
			}
		}
	}

	exp := 0
	if consume('e') || consume('E') {
		if !useDouble {
			d = float64(i)
			useDouble = true
		}
		// A sign: '+' is consumed and changes nothing.
		expMinus := !consume('+') && consume('-')
		if !isDigit(peek(p)) {
			return Num{}, p, &SyntaxError{msgNumberMissExponent, p}
		}
		// A negative exponent drops its digits from 214748364 on; a
		// positive one fails past 308-expFrac.
		exp = int(data[p] - '0')
		for p++; p < n && isDigit(data[p]); p++ {
			if expMinus && exp >= 214748364 {
				continue
			}
			exp = exp*10 + int(data[p]-'0')
			if !expMinus && exp > 308-expFrac {
				return Num{}, p + 1, &SyntaxError{msgNumberTooBig, start}
			}
		}
		if expMinus {
			exp = -exp
		}
	}

	switch {
	case useDouble:
		d = normalPrecision(d, exp+expFrac)
		if minus {
			d = -d
		}
		return Num{flagDouble, math.Float64bits(d)}, p, nil
	case nanOrInf:
		return Num{flagDouble, math.Float64bits(d)}, p, nil
	case minus:
		return Num{intFlags(int64(^i + 1)), ^i + 1}, p, nil
	default:
		return Num{uintFlags(i), i}, p, nil
	}
}

// intFlags returns rapidjson's flags for a signed integer (non-negative
// ones get the unsigned flags too: "-0" is a plain 0).
func intFlags(v int64) uint8 {
	if v >= 0 {
		return uintFlags(uint64(v))
	}
	f := flagInt64 | flagNeg
	if v >= math.MinInt32 {
		f |= flagInt
	}
	return f
}

// uintFlags returns the flags of a non-negative integer.
func uintFlags(u uint64) uint8 {
	f := flagUint64
	if u <= math.MaxInt64 {
		f |= flagInt64
	}
	if u <= math.MaxUint32 {
		f |= flagUint
	}
	if u <= math.MaxInt32 {
		f |= flagInt
	}
	return f
}

// normalPrecision is rapidjson's internal::StrtodNormalPrecision, its
// FastPath steps inlined: below 1e-308 it divides twice.
func normalPrecision(d float64, p int) float64 {
	if p < -308 {
		d, p = d/pow10[308], p+308
		if p < -308 {
			return 0
		}
	}
	if p >= 0 {
		return d * pow10[p]
	}
	return d / pow10[-p]
}

// Num is one parsed number token as rapidjson holds it: its range flags
// and payload, converted bit for bit as rapidjson converts them.
type Num struct {
	flags uint8
	bits  uint64
}

// ParseNumber parses the number token at data[p] as the Tokenizer does
// (NaN/Inf included) and returns it with the offset after it; ok is false
// at a syntax error. Past the end of data the input reads as NUL: a
// streaming caller hands it a token known to be complete.
func ParseNumber(data []byte, p int) (n Num, end int, ok bool) {
	n, end, err := parseNumber(data, p)
	return n, end, err == nil
}

// IsInt reports an integer in int32 range (rapidjson IsInt).
func (n Num) IsInt() bool { return n.flags&flagInt != 0 }

// IsUint reports an integer in uint32 range (rapidjson IsUint).
func (n Num) IsUint() bool { return n.flags&flagUint != 0 }

// IsInt64 reports an integer in int64 range (rapidjson IsInt64).
func (n Num) IsInt64() bool { return n.flags&flagInt64 != 0 }

// IsUint64 reports an integer in uint64 range (rapidjson IsUint64).
func (n Num) IsUint64() bool { return n.flags&flagUint64 != 0 }

// IsDouble reports a number that is not an integer token (rapidjson
// IsDouble): a decimal, an exponent, NaN/Inf, an integer beyond uint64.
func (n Num) IsDouble() bool { return n.flags&flagDouble != 0 }

// Int64 returns an IsInt64 number exactly (0 for others).
func (n Num) Int64() int64 {
	if !n.IsInt64() {
		return 0
	}
	return int64(n.bits)
}

// Uint64 returns an IsUint64 number exactly (0 for others).
func (n Num) Uint64() uint64 {
	if !n.IsUint64() {
		return 0
	}
	return n.bits
}

// Float64 returns the number as rapidjson's GetDouble does.
func (n Num) Float64() float64 {
	switch {
	case n.flags&flagDouble != 0:
		return math.Float64frombits(n.bits)
	case n.flags&flagNeg != 0:
		return float64(int64(n.bits))
	default:
		return float64(n.bits)
	}
}

// AppendDecimals reads numbers as ParseNumber does, for the hottest loop
// of a request: up to limit numbers "v, v, v" (a comma and at most one
// space between them) from data[p:], each appended to dst, which must have
// the room, as Num.Float64's value in a little-endian float32 (float64
// when wide). With width > 0 it also steps from a list of width values (n
// of them before data[p]) to its sibling, "], [" or "],[", with that
// list's first value; a list counts against limit as a value. It returns
// the offset after the last number taken (p for none), how many it took
// and how many lists it stepped into, stopping before anything else so
// that the caller goes on at the last number's separator.
//
// It takes -?int[.frac] with at most 15 integer digits and decimalLookahead
// bytes to read ahead, eight digits per load, and leaves the rest
// (exponents, "01", "-0", the end of data) to ParseNumber. Each digit goes
// into rapidjson's 64-bit significand m while m <= 2^53-1 before it; with
// D digits in m (the integer part's, none for "0", and the fraction's L),
// m < 10^15 up to the 16th, so for D <= 16 the value is float64(m) / 10^L.
// The 17th goes into m when the 16 before are at most 2^53-1, else into
// the double as d*10 + digit; longer fractions go through parseNumber.
// The loop holds every token's code: a call per value cost a tenth.
func AppendDecimals(dst, data []byte, p int, wide bool, limit, width, n int) (out []byte, end, took, lists int) {
	if wide {
		return appendDecimals[float64](dst, data, p, limit, width, n)
	}
	return appendDecimals[float32](dst, data, p, limit, width, n)
}

// appendDecimals is AppendDecimals for one element type: one copy of the
// loop per type, without the test of wide per value.
func appendDecimals[T float32 | float64](dst, data []byte, p, limit, width, n int) (out []byte, end, took, lists int) {
	size := valueSize[T]()
	l0 := len(dst)
	end = p
	last := len(data) - decimalLookahead // the last offset a token may start at
	cool := 0                            // values to take here before trying a same-shape run again
values:
	for ; limit > 0 && p <= last; limit-- {
		if cool--; cool < 0 {
			var took, ls int
			dst, p, end, limit, n, took, ls = sameShape[T](dst, data, p, end, limit, width, n, last)
			lists += ls
			if took < sameShapeMin {
				cool = sameShapeCooling
			}
			if limit <= 0 || p > last {
				break
			}
		}
		// Offsets are absolute: a window slice (data[p:]) put its pointer
		// arithmetic on the chain from one token to the next (1.25x the time).
		q := p
		neg := data[q] == '-'
		if neg {
			q++
		}
		// The integer part: "0", or up to 15 digits in two loads.
		var mi uint64
		ni := 1
		if c := data[q]; c != '0' && isDigit(c) && data[q+1] == '.' {
			// One integer digit, as in "1.234567": the fraction's load
			// below then starts at a known offset instead of waiting for
			// the integer run's length (1.2-1.4x the time per value).
			mi = uint64(c - '0')
		} else if c != '0' {
			w := binary.LittleEndian.Uint64(data[q:])
			if ni = digitRun(w); ni == 0 {
				break
			}
			mi = digitsValue(w, ni)
			if ni == 8 {
				w = binary.LittleEndian.Uint64(data[q+8:])
				k := digitRun(w)
				if k == 8 {
					break
				}
				mi = mi*pow10u[k] + digitsValue(w, k)
				ni += k
			}
		}
		q += ni
		var f float64
		switch data[q] {
		case '.':
			q++
			// The fraction: up to 16 digits in two loads, and a 17th.
			x := binary.LittleEndian.Uint64(data[q:])
			L := digitRun(x)
			if L == 0 {
				break values // "Miss fraction part"
			}
			m := mi*pow10u[L] + digitsValue(x, L)
			if L == 8 {
				x = binary.LittleEndian.Uint64(data[q+8:])
				k := digitRun(x)
				m = m*pow10u[k] + digitsValue(x, k)
				if L += k; L == 16 && isDigit(data[q+16]) {
					m = m*10 + uint64(data[q+16]-'0')
					L++
				}
			}
			D := L // digits in m: wrapped values of m are never used
			if mi != 0 {
				D += ni
			}
			switch {
			case D <= 16 || D == 17 && m/10 <= 1<<53-1 && !isDigit(data[q+L]):
				// m < 10^17 < 2^63: the signed conversion is the same
				// value, without the unsigned one's branch.
				f = float64(int64(m)) / pow10[L]
				q += L
			case D == 17 && !isDigit(data[q+L]):
				// The explicit conversion forbids a fused multiply-add,
				// which C++ (SSE2) does not use either.
				f = (float64(float64(m/10)*10) + float64(m%10)) / pow10[L]
				q += L
			default:
				e := 0
				if f, e = longFraction(data, p); e < 0 {
					break values
				}
				q = e
			}
			if data[q]|0x20 == 'e' {
				break values
			}
		case 'e', 'E':
			break values
		default:
			// An integer, exact in a double: "01" and "-0" (the integer 0)
			// are left to ParseNumber.
			if mi == 0 && (neg || isDigit(data[q])) {
				break values
			}
			f = float64(mi)
		}
		dst = putValue(dst, f, neg, size)
		n++
		end = q
		// The separator, without going back to the tokenizer: ", " or
		// ",", and between sibling lists "], [" or "],[" (other spacing
		// is left to the caller).
		switch c := data[q]; {
		case c == ',':
			if q++; q < len(data) && data[q] == ' ' {
				q++
			}
			p = q
		case c == ']' && n == width && limit > 1 && q+4 <= len(data):
			switch binary.LittleEndian.Uint32(data[q:]) {
			case '['<<24 | ' '<<16 | ','<<8 | ']':
				p = q + 4
			default:
				if data[q+1] != ',' || data[q+2] != '[' {
					break values
				}
				p = q + 3
			}
			n = 0
			lists++
			limit--
		default:
			break values
		}
	}
	if n == 0 && lists > 0 {
		lists-- // stepped into a list without taking its first value
	}
	return dst, end, (len(dst) - l0) / size, lists
}

// sameShapeCooling is how many values appendDecimals takes itself after a
// same-shape run that took fewer than sameShapeMin, before it tries one
// again: text whose lengths vary (shortest-form floats) pays for the
// attempt once in that many values.
const (
	sameShapeCooling = 64
	sameShapeMin     = 4
)

// sameShape is appendDecimals' loop for text written at a fixed precision
// (printf's %.6f, strconv's 'f' with a precision): it takes values while
// they keep the first one's shape, an optional sign, one integer digit, the
// point and k fraction digits (k from 1 to 8), each followed by that
// value's separator (", " or ","), or by a step to the sibling list.
//
// Why a loop of its own: in appendDecimals the next value's offset is
// computed from the bytes of this one (how many digits, which separator),
// a chain of loads and arithmetic from one value to the next that the
// processor cannot run ahead of. Here the offset is this one's plus a
// length fixed for the run, and the checks that the bytes have the
// run's shape are branches the processor predicts, so it parses the next
// values while this one's checks complete (1.2-1.3x the throughput on
// such text). Only a sign stays on the chain.
//
// Its values are appendDecimals' own: at most 9 digits, so m < 10^9 and
// the value is float64(m) / 10^k (a ninth fraction digit fails the
// separator's check). It stops before the first value of another shape,
// or followed by anything else, which appendDecimals then reads itself (or
// stops at). It returns appendDecimals' state after the values it took,
// how many it took and how many lists it stepped into.
func sameShape[T float32 | float64](dst, data []byte, p, end, limit, width, n, last int) (_ []byte, _, _, _, _, took, lists int) {
	size := valueSize[T]()
	// The shape, from the first value.
	q := p
	if data[q] == '-' {
		q++
	}
	k := digitRun(binary.LittleEndian.Uint64(data[q+2:]))
	if !isDigit(data[q]) || data[q+1] != '.' || k == 0 || data[q+2+k] != ',' {
		return dst, p, end, limit, n, 0, 0
	}
	space, sep := data[q+3+k] == ' ', 1
	if space {
		sep = 2
	}
	scale, mul, l0 := pow10[k], pow10u[k], len(dst)
values:
	for limit > 0 && p <= last {
		q := p
		neg := data[q] == '-'
		if neg {
			q++
		}
		c := data[q] - '0'
		x := binary.LittleEndian.Uint64(data[q+2:])
		if c >= 10 || data[q+1] != '.' || digitRun(x) != k {
			break
		}
		q += 2 + k
		next, step := q+sep, false
		switch {
		case data[q] == ',' && (data[q+1] == ' ') == space:
		case data[q] == ']' && n+1 == width && limit > 1:
			// As appendDecimals steps: "], [" or "],[".
			if binary.LittleEndian.Uint32(data[q:]) == '['<<24|' '<<16|','<<8|']' {
				next = q + 4
			} else if data[q+1] == ',' && data[q+2] == '[' {
				next = q + 3
			} else {
				break values
			}
			step = true
		default:
			break values
		}
		dst = putValue(dst, float64(int64(uint64(c)*mul+digitsValue(x, k)))/scale, neg, size)
		end, p, n = q, next, n+1
		limit--
		if step {
			n = 0
			lists++
			limit--
		}
	}
	return dst, p, end, limit, n, (len(dst) - l0) / size, lists
}

// valueSize is the bytes of a T on the wire, 4 or 8: a constant test per
// instantiation (float32 cannot hold 2^24+1), so the loops' stores compile
// to one width.
func valueSize[T float32 | float64]() int {
	if T(1<<24+1) != 1<<24 {
		return 8
	}
	return 4
}

// putValue appends f, negated when neg, to dst (which has the room) as a
// little-endian float32, or a float64 when size is 8: the store of both
// of appendDecimals' loops.
func putValue(dst []byte, f float64, neg bool, size int) []byte {
	if neg {
		f = -f
	}
	l := len(dst)
	dst = dst[:l+size]
	if size == 8 {
		binary.LittleEndian.PutUint64(dst[l:], math.Float64bits(f))
	} else {
		binary.LittleEndian.PutUint32(dst[l:], math.Float32bits(float32(f)))
	}
	return dst
}

// decimalLookahead is how far past a token's start AppendDecimals may
// read: a sign, 15 integer digits and the point, 16 fraction digits, a
// 17th and the byte after it, and the "], [" after that.
const decimalLookahead = 40

// longFraction reads AppendDecimals' token at data[p:], a fraction past
// 17 digits, with parseNumber: its magnitude and end, or end < 0 at the
// end of data. A call to parseNumber in the loop would cost its registers.
func longFraction(data []byte, p int) (f float64, end int) {
	num, end, err := parseNumber(data, p)
	if err != nil || end >= len(data) {
		return 0, -1
	}
	return math.Abs(num.Float64()), end
}

// digitRun returns how many of the eight bytes of x (the first in the low
// byte) are digits before the first that is not. A digit byte is
// 0x30…0x39: its high nibble is 3, and adding 6 keeps it 3. A carry out
// of a non-digit byte only reaches later bytes.
func digitRun(x uint64) int {
	t := x&0xF0F0F0F0F0F0F0F0 | (x+0x0606060606060606)&0xF0F0F0F0F0F0F0F0>>4
	return bits.TrailingZeros64(t^0x3333333333333333) >> 3
}

// digitsValue returns the value of the first k (0…8) digits of x, the
// first in the low byte (0 for k = 0: Go's shift by 64 clears).
func digitsValue(x uint64, k int) uint64 {
	x &= 0x0F0F0F0F0F0F0F0F  // digit values
	x <<= 8 * (8 - k)        // keep the run, zero digits in front (all for k = 0)
	x = x * (1 + 10<<8) >> 8 // pairs of digits
	x = (x & 0x00FF00FF00FF00FF) * (1 + 100<<16) >> 16
	return (x & 0x0000FFFF0000FFFF) * (1 + 10000<<32) >> 32
}

// pow10u holds 10^0 … 10^9.
var pow10u = [10]uint64{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000}
