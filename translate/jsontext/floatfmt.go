package jsontext

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"
)

// TF Serving prints a float (json_tensor.cc WriteDecimal, docs/tfserving-rest.md
// §5.2) as NaN/Infinity/-Infinity bare; else printf "%.6g", or "%.9g"
// (float) / "%.17g" (double) when that text does not parse back to the
// same value; then ".0" when the text has neither '.' nor 'e'. Done
// literally that is two or three conversions per value (~100ns with
// strconv), and an image model returns hundreds of thousands of floats,
// so the same bytes are made in one pass for most values:
//
//  1. D is x correctly rounded to P = 9 (float) or 17 (double) digits,
//     ties to even as glibc: for float32 in fixed form, [1e-4, 1e9), one
//     exact float64 product rounded by the FPU (f32Scale, the FP32 loop);
//     for other float32s one float64 product within a known error
//     (float32Digits); strconv where that cannot decide, and for doubles.
//  2. t, D's last P-6 digits, is the distance in units u of D's last
//     digit from the 6-digit decimal below D. %.6g round-trips only if the
//     nearest 6-digit decimal is within ulp(x)/2 of x; ulp(x)/2 < 59.7u for
//     a normal float32 and < 11.2u for a normal float64, and |x-D| <= u/2,
//     so when t is at least 61 (float) or 13 (double) from both 0 and
//     10^(P-6), D is the answer: 88% of random float32s, nearly all
//     float64s. Knowing ulp(x), the float32 paths tighten the bound to
//     floor(ulp(x)/2u) + 2, which passes ~97% of image values in [0,1).
//  3. Otherwise t is far from the half-way point, so D rounded to 6
//     digits is x rounded to 6 digits (double rounding differs only at an
//     exact half): %.6g's value, kept if it parses back to x as TF's does.
//
// Zero and subnormals (whose ulp the bound does not cover) take the
// literal format-parse-format path. The tests hold the literal algorithm
// as the oracle, on millions of values and under fuzzing.

// AppendFloat32 appends f as TF Serving prints a DT_FLOAT (docs/tfserving-rest.md
// §5.2): bare NaN/Infinity/-Infinity; else %.6g, or %.9g when that does not
// parse back to f; ".0" when the text has neither '.' nor an exponent.
func AppendFloat32(dst []byte, f float32) []byte {
	var le [4]byte
	binary.LittleEndian.PutUint32(le[:], math.Float32bits(f))
	return appendFloat32s(dst, le[:], 0, 0)
}

// appendFloat32s appends each little-endian float32 of le as
// AppendFloat32 does, ", " between them, or, with row > 0, as the
// innermost lists of a single-line nested value: "], [" after every row-th
// value, counting from col values already in the current list. It is the
// inner loop of every FP32 response, so the usual value (normal, in fixed
// form) is written in a loop of its own (appendFixedRun), the rest out of
// line (appendFloat32Other). The loop is bound by its instruction count:
//
//   - D is a float64 product by a power of ten (exact, see f32Scale)
//     rounded to an integer by adding 2^52: no 128-bit shifts.
//   - Values step 2 does not settle (one in twenty of an image) try %.6g
//     (step 3) in the loop too.
//   - The digits are one multiplication for the lead and three lane steps
//     for the other eight (eightDigitsRev), stored as whole words into room
//     reserved per block of values, the trailing zeros counted in the word.
//   - Every value is followed by ", ", which the end of a list overwrites
//     with "], ["; the last separator is taken back at the end.
//   - The run loop makes no call and holds only the run's state: with the
//     rare values' call and the block bookkeeping in it, the compiler
//     reloaded nine variables from the stack for every value.
//
// Measured no faster (valgrind instruction counts), so not done: the
// decade chosen by a mask, the text built in two words at fixed offsets,
// a decade's fields packed in one word or a flat table, windows at a
// masked offset of a fixed-size array, the lead digit added into "0.000".
func appendFloat32s(dst, le []byte, row, col int) []byte {
	// block is the most values room is reserved for at once.
	const block = 256
	le = le[:len(le)&^3]
	if len(le) == 0 {
		return dst
	}
	n := len(dst)
	left := row - col // values until the current list ends (never when row is 0)
	for len(le) > 0 {
		run := le[:min(len(le), 4*block)]
		le = le[len(run):]
		if cap(dst)-n < len(run)/4*valueRoom {
			dst = slices.Grow(dst[:n], len(run)/4*valueRoom)
		}
		dst = dst[:cap(dst)]
		for {
			var j int
			j, n, left = appendFixedRun(dst, run, n, left, row)
			if j >= len(run) {
				break
			}
			// A value the run loop leaves: written out of line, then its
			// separator as the loop writes it.
			i := len(appendFloat32Other(dst[:n], binary.LittleEndian.Uint32(run[j:]))) - n
			n, left = endValue((*[valueRoom]byte)(dst[n:n+valueRoom]), i, n, left, row)
			run = run[j+4:]
		}
	}
	if row > 0 && left == row { // the last value ended a list
		return dst[:n-4]
	}
	return dst[:n-2]
}

// valueRoom is the window one value is written in: up to 15 bytes of text
// and 4 of separator, and the slack whole-word stores write past them.
const valueRoom = 32

// appendFixedRun writes the values at the start of run that it writes
// itself (normal, in fixed form), each with its separator (endValue), into
// dst from n on (valueRoom bytes for each), up to the first other value.
// It returns the offset in run where it stopped, the new n and left.
func appendFixedRun(dst, run []byte, n, left, row int) (int, int, int) {
	j := 0
	for ; j < len(run)-3; j += 4 { // this form proves run[j:] needs no check
		b := binary.LittleEndian.Uint32(run[j:])
		sc := &f32Scales[b>>23&0xFF]
		d, up := sc.digits(b)
		dc := &sc[up]
		exp := int(dc.exp)
		if uint64(d)*mod1000-dc.lowMargin > dc.lowSpan {
			// Not settled by step 2, not in fixed form (lowMargin 1), or D
			// of ten digits (9.99999999x rounded up: D%1000 is 0).
			if dc.lowMargin == 1 {
				break
			}
			// Step 3 inline (no call in the loop): D rounded to six
			// digits (no tie: D%1000 is near 0 or 1000), its round trip
			// one exact float32 division or multiplication (exponent
			// -9…1), rounded as strtof rounds.
			d6, exp6 := (d+500)/1000, exp
			if d6 == 1_000_000 {
				d6, exp6 = 100_000, exp+1
			}
			if exactParse[float32](d6, exp6-5) == math.Float32frombits(b&^(1<<31)) {
				// %.6g's six digits followed by three zeros (trimmed,
				// its text), in fixed form for exponents -4…5.
				d, exp = d6*1000, exp6
				if exp > 5 {
					break
				}
			} else {
				if d == 1_000_000_000 {
					d, exp = 100_000_000, exp+1
				}
				if exp > 8 {
					break
				}
			}
		}
		w := (*[valueRoom]byte)(dst[n : n+valueRoom])
		i := int(b >> 31) // the sign
		w[0] = '-'
		lead := d / 100_000_000
		raw := eightDigitsRev(d - lead*100_000_000)
		// Zero digits ending the eight (the lead is not zero); 8 when
		// raw is 0, as TrailingZeros64(0) is 64.
		tz := bits.TrailingZeros64(raw) >> 3
		digits := bits.ReverseBytes64(raw) | 0x3030_3030_3030_3030
		if exp < 0 { // "0." and -exp-1 zeros, then the digits
			binary.LittleEndian.PutUint64(w[i:], 0x3030_3030_3030_2e30) // "0.000000"
			i = (i + 1 - exp) & 7
			w[i] = byte('0' + lead)
			binary.LittleEndian.PutUint64(w[i+1:], digits)
			i += 9 - tz
		} else {
			// "ddd.ddd": the nine digits, then the point after exp+1 of
			// them and the fraction's 8-exp digits stored over the rest,
			// the trailing zeros dropped but at least ".0" kept.
			w[i] = byte('0' + lead)
			binary.LittleEndian.PutUint64(w[i+1:], digits)
			point := (i + exp + 1) & 15
			w[point] = '.'
			binary.LittleEndian.PutUint64(w[point+1:], digits>>(8*exp&63))
			if tz < 8-exp {
				i += 10 - tz
			} else {
				w[point+1] = '0'
				i = point + 2
			}
		}
		n, left = endValue(w, i, n, left, row)
	}
	return j, n, left
}

// endValue writes the separator after the i bytes of a value at the start
// of w, the window at n: ", ", or "], [" when left reaches 0 (never for
// row 0). It returns the new n and left.
func endValue(w *[valueRoom]byte, i, n, left, row int) (int, int) {
	binary.LittleEndian.PutUint32(w[i&15:], ' '<<8|',')
	n += i + 2
	if left--; left == 0 {
		binary.LittleEndian.PutUint32(w[i&15:], '['<<24|' '<<16|','<<8|']')
		n += 2
		left = row
	}
	return n, left
}

// eightDigitsRev returns v < 10^8 as eight digit values, one a byte, the
// last digit in the low byte (bits.ReverseBytes64 puts them in text
// order). Each step splits every lane by a multiplication for the quotient
// and adds quotient*(2^w - divisor), leaving remainder low and quotient
// high: /10^4 is *109951163 >> 40 below 10^8, /100 is *10486 >> 20 below
// 43699, /10 is *103 >> 10 below 179; no product reaches the next lane.
func eightDigitsRev(v uint32) uint64 {
	x := uint64(v)
	q := x * 109_951_163 >> 40
	x += q * (1<<32 - 10_000)
	q = (x * 10486 >> 20) & 0x0000_007F_0000_007F
	x += q * (1<<16 - 100)
	q = (x * 103 >> 10) & 0x000F_000F_000F_000F
	return x + q*(1<<8-10)
}

// f32Scale is appendFloat32s' step from a float32 x with biased exponent
// e to D. x's decimal exponent is exp0 = floor((e-127)*log10(2)) or
// exp0+1, and V = |x|*10^(8-exp) has nine integer digits: the loop takes
// the product by 10^(7-exp0) when the one by 10^(8-exp0) reaches 10^9.
// In fixed form (exp in -4…8, 5^12 < 2^28, 24-bit |x|) the product is
// exact, so rounding it is the FPU's round half to even. A rounded first
// product (exp0 = -5) still decides the decade: rounding is monotonic,
// and the tests check both sides of every decade's start.
type f32Scale [2]f32Decade

// f32Decade is one decade of an f32Scale, what the loop reads at one address.
type f32Decade struct {
	pow float64 // 10^(8-exp)
	// lowMargin and lowSpan test step 2's margin <= D%1000 <= 1000-margin
	// on D*mod1000 (settledLow). A decade the loop does not write has
	// lowSpan 0 and lowMargin 1, which no D passes (D*mod1000 is never 1:
	// that needs t = 0 and (D/1000)*384 = 1).
	lowMargin, lowSpan uint64
	exp                int8
}

// mod1000 is ceil(2^64/1000): for D < 10^9 and t = D%1000, D*mod1000 mod
// 2^64 is t*mod1000 + (D/1000)*384 (1000*mod1000 is 2^64+384), below
// (t+1)*mod1000. So margin <= t <= 1000-margin exactly when D*mod1000 -
// margin*mod1000 <= (1001-2*margin)*mod1000 - 1 in uint64: one
// multiplication where D%1000 takes two and a shift.
const mod1000 = 1<<64/1000 + 1

// settledLow returns lowMargin and lowSpan for step 2's margin.
func settledLow(margin uint64) (lowMargin, lowSpan uint64) {
	return margin * mod1000, (1001-2*margin)*mod1000 - 1
}

// digits returns D and its decade (0 or 1) for the float32 with bits b,
// whose entry sc is: correct where the loop writes the decade.
func (sc *f32Scale) digits(b uint32) (d uint32, up uint) {
	x := float64(math.Float32frombits(b &^ (1 << 31)))
	// The conversions keep each product rounded on its own (no fused
	// multiply-add, which would not change an exact product anyway).
	va, vb := float64(x*sc[0].pow), float64(x*sc[1].pow)
	d = uint32(math.Float64bits(va + 0x1p52)) // the low 32 bits of 2^52+D are D
	up = bitIf(va >= 1e9)
	if up != 0 {
		d = uint32(math.Float64bits(vb + 0x1p52))
	}
	return d, up & 1
}

// f32Scales is appendFloat32s' table, one entry per biased exponent (the
// tests check every decade's ends against strconv).
var f32Scales = func() (t [256]f32Scale) {
	for e := range t {
		t[e][0].lowMargin, t[e][1].lowMargin = 1, 1 // unless the loop writes the decade
		// |x| = m*2^q, m the 24-bit mantissa
		q := e - 150
		exp0 := log10Pow2(q + 23)
		if e == 0 || e == 0xFF || exp0 < -5 || exp0 > 8 {
			continue
		}
		t[e][0].pow, t[e][1].pow = pow10[8-exp0], pow10[max(7-exp0, 0)]
		for up := range 2 {
			exp := exp0 + up
			if exp < -4 || exp > 8 {
				continue
			}
			// floor(ulp(x)/2) in V's units, 2^(q-1) * 10^(8-exp), plus 2.
			dc := &t[e][up]
			dc.exp = int8(exp)
			dc.lowMargin, dc.lowSpan = settledLow(uint64(math.Ldexp(pow10[8-exp], q-1)) + 2)
		}
	}
	return t
}()

// appendFloat32Other is appendFloat32s for a float32 (bits b) its loop
// does not write: non-finite, zero, subnormal, in exponent form, or near
// a six-digit decimal (step 3).
func appendFloat32Other(dst []byte, b uint32) []byte {
	f := float64(math.Float32frombits(b))
	switch b >> 23 & 0xFF {
	case 0xFF:
		return appendNonFinite(dst, f)
	case 0:
		return appendLiteral(dst, f, 32, 9)
	}
	d, exp, margin, ok := float32Digits(b)
	if !ok {
		d, exp = strconvDigits(f, 32, 9)
		margin = 61
	}
	return appendChoice(dst, f, b>>31 != 0, d, exp, 32, 9, 1000, margin)
}

// AppendFloat64 appends d as TF Serving prints a DT_DOUBLE: as
// AppendFloat32 but with %.17g as the fallback.
func AppendFloat64(dst []byte, v float64) []byte {
	b := math.Float64bits(v)
	switch b >> 52 & 0x7FF {
	case 0x7FF:
		return appendNonFinite(dst, v)
	case 0:
		return appendLiteral(dst, v, 64, 17)
	}
	d, exp := strconvDigits(v, 64, 17)
	return appendChoice(dst, v, b>>63 != 0, d, exp, 64, 17, 100_000_000_000, 13)
}

func appendNonFinite(dst []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	case v > 0:
		return append(dst, "Infinity"...)
	}
	return append(dst, "-Infinity"...)
}

// appendChoice does steps 2 and 3 for a finite, normal v, |v| rounded to
// prec digits being d*10^(exp-prec+1); tailMod is 10^(prec-6) and margin
// step 2's bound.
func appendChoice(dst []byte, v float64, neg bool, d uint64, exp, bits, prec int, tailMod, margin uint64) []byte {
	if t := d % tailMod; t >= margin && t <= tailMod-margin {
		return appendDecimal(dst, neg, d, prec, exp)
	}
	d6, exp6 := (d+tailMod/2)/tailMod, exp // no tie: t is near 0 or tailMod
	if d6 == 1_000_000 {
		d6, exp6 = 100_000, exp6+1
	}
	if sixDigitsRoundTrip(math.Abs(v), d6, exp6-5, bits) {
		return appendDecimal(dst, neg, d6, 6, exp6)
	}
	return appendDecimal(dst, neg, d, prec, exp)
}

// sixDigitsRoundTrip reports whether the decimal d6*10^e (d6 < 10^6)
// parses back, as TF Serving's strtof/strtod would, to a (finite, not
// negative). When 10^|e| is exact in the type (|e| <= 10 for float32, 22
// for float64) that parse is one correctly rounded operation on exact
// operands (strconv's own fast path) and most step-3 values are near 1,
// so strconv.ParseFloat is left for the rest.
func sixDigitsRoundTrip(a float64, d6 uint64, e, bits int) bool {
	switch {
	case bits == 32 && -10 <= e && e <= 10:
		return float64(exactParse[float32](uint32(d6), e)) == a
	case bits == 64 && -22 <= e && e <= 22:
		return exactParse[float64](uint32(d6), e) == a
	}
	// "d6e<e>" for ParseFloat, in a buffer on the stack.
	var buf [32]byte
	text := strconv.AppendInt(append(strconv.AppendUint(buf[:0], d6, 10), 'e'), int64(e), 10)
	back, err := strconv.ParseFloat(string(text), bits)
	return err == nil && back == a
}

// exactParse is strtof (F float32) or strtod (float64) of d6*10^e, 10^|e|
// exact in F: one correctly rounded division or multiplication.
func exactParse[F float32 | float64](d6 uint32, e int) F {
	f, p := F(d6), F(pow10[max(e, -e)])
	if e < 0 {
		return f / p
	}
	return f * p
}

// appendLiteral is TF Serving's algorithm done literally: format %.6g,
// parse it back, reformat with the fallback precision when it differs.
func appendLiteral(dst []byte, v float64, bits, fallback int) []byte {
	if d, exp := strconvDigits(v, 64, 6); sixDigitsRoundTrip(math.Abs(v), d, exp-5, bits) {
		return appendDecimal(dst, math.Signbit(v), d, 6, exp)
	}
	d, exp := strconvDigits(v, 64, fallback)
	return appendDecimal(dst, math.Signbit(v), d, fallback, exp)
}

// strconvDigits returns |v| rounded to prec significant digits as
// d*10^(exp-prec+1), d of exactly prec digits, read from strconv's
// correctly rounded 'e' format ("d.ddde+XX").
func strconvDigits(v float64, bits, prec int) (d uint64, exp int) {
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], math.Abs(v), 'e', prec-1, bits)
	i := 0
	for ; s[i] != 'e'; i++ {
		if c := s[i]; c != '.' {
			d = d*10 + uint64(c-'0')
		}
	}
	for _, c := range s[i+2:] {
		exp = exp*10 + int(c-'0')
	}
	if s[i+1] == '-' {
		exp = -exp
	}
	return d, exp
}

// float32Digits returns |x| rounded to 9 significant digits (ties to
// even) for the normal float32 with bits b, |x| = d*10^(exp-8) with
// 10^8 <= d < 10^9, and step 2's margin: floor of ulp(x)/2 in units of d's
// last digit, plus 2. V = |x|*10^(8-exp), one product or quotient by a
// correctly rounded power of ten, is within 2^-22 of the exact value, so
// its nearest integer is D unless V lies within 2^-19 of a half-integer
// (then ok only if V is exact, FMA finding no remainder: a tie, rounded to
// even) or of 10^9, where the caller uses strconv.
func float32Digits(b uint32) (d uint64, exp int, margin uint64, ok bool) {
	x := float64(math.Float32frombits(b &^ (1 << 31)))
	q := int(b>>23&0xFF) - 150
	exp = log10Pow2(q + 23) // or one more: then V >= 10^9
	v := scale10(x, 8-exp)
	if v >= 1e9 {
		exp++
		v = scale10(x, 8-exp)
	}
	n := math.Floor(v)
	fr := v - n // exact
	if n < 1e8 || n >= 1e9-1 {
		return 0, 0, 0, false
	}
	if k := 8 - exp; math.Abs(fr-0.5) < 0x1p-19 &&
		!(k >= 0 && k <= 22 && math.FMA(x, pow10[k], -v) == 0 ||
			k < 0 && k >= -22 && math.FMA(v, pow10[-k], -x) == 0) {
		return 0, 0, 0, false
	}
	d = uint64(n)
	if fr > 0.5 || fr == 0.5 && d&1 == 1 {
		d++
	}
	// ulp(x)/2 = 2^(q-1) in V's scale, rounded up past the product's error.
	half := scale10(math.Float64frombits(uint64(q-1+1023)<<52), 8-exp) * (1 + 0x1p-40)
	return d, exp, uint64(half) + 2, true
}

// scale10 returns x*10^k, one correctly rounded operation.
func scale10(x float64, k int) float64 {
	if k < 0 {
		return x / pow10[-k]
	}
	return x * pow10[k]
}

// log10Pow2 returns floor(p*log10(2)), exactly for |p| < 1650.
func log10Pow2(p int) int { return (p * 78913) >> 18 }

// bitIf is 1 for true: the compiler turns it into a SETcc, not a branch.
func bitIf(c bool) uint {
	if c {
		return 1
	}
	return 0
}

// digitPairs is "00010203...99", for writing two digits at a time.
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

// appendDecimal appends d*10^(exp-nd+1), d of exactly nd digits, as
// printf's %.<nd>g writes it (exponent form when exp < -4 or exp >= nd,
// trailing zeros dropped, an exponent of two digits at least), then TF's
// ".0" for a text that would read as an integer. All nd digits are
// written in place into spare capacity and the zeros trimmed afterwards.
func appendDecimal(dst []byte, neg bool, d uint64, nd, exp int) []byte {
	n := len(dst)
	dst = slices.Grow(dst, 32) // longest: "-0.0000" + 17 digits, or "-d." + 16 digits + "e-308"
	b := dst[n : n+32]
	i := 0
	if neg {
		b[0] = '-'
		i = 1
	}
	switch {
	case exp < -4 || exp >= nd: // "d.ddde+XX"
		putDigits(b[i+1:i+1+nd], d)
		b[i], b[i+1] = b[i+1], '.'
		i += nd + 1
		for b[i-1] == '0' { // stops at the '.'
			i--
		}
		if b[i-1] == '.' {
			i--
		}
		b[i], b[i+1] = 'e', '+'
		if exp < 0 {
			b[i+1] = '-'
			exp = -exp
		}
		i += 2
		if exp >= 100 {
			b[i] = byte('0' + exp/100)
			exp %= 100
			i++
		}
		b[i], b[i+1] = digitPairs[2*exp], digitPairs[2*exp+1]
		i += 2
	case exp < 0: // "0.000ddd"
		b[i], b[i+1] = '0', '.'
		i += 2
		for j := -1; j > exp; j-- {
			b[i] = '0'
			i++
		}
		putDigits(b[i:i+nd], d)
		i += nd
		for b[i-1] == '0' { // stops at d's leading digit, never zero here
			i--
		}
	default: // "ddd.ddd": write one place right, pull the integer part left
		putDigits(b[i+1:i+1+nd], d)
		copy(b[i:], b[i+1:i+2+exp])
		b[i+exp+1] = '.'
		i += nd + 1
		for b[i-1] == '0' { // stops at the '.'
			i--
		}
		if b[i-1] == '.' {
			b[i] = '0'
			i++
		}
	}
	return dst[:n+i]
}

// putDigits writes d into b as exactly len(b) decimal digits. Nine digits,
// every float32, are the leading digit and eight written at once.
func putDigits(b []byte, d uint64) {
	if len(b) == 9 {
		v := uint32(d)
		b[0] = byte('0' + v/100_000_000)
		binary.LittleEndian.PutUint64(b[1:], bits.ReverseBytes64(eightDigitsRev(v%100_000_000))|0x3030_3030_3030_3030)
		return
	}
	i := len(b)
	for ; i >= 2; i -= 2 {
		p := d % 100 * 2
		d /= 100
		b[i-2], b[i-1] = digitPairs[p], digitPairs[p+1]
	}
	if i == 1 {
		b[0] = byte('0' + d)
	}
}
