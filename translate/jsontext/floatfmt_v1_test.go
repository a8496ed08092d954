package jsontext

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// appendFloat32sV1 is the loop appendFloat32s replaced (issue #23: one
// scale-table lookup and a fixed 64-bit shift instead of the per-value
// decade arithmetic and 128-bit shifts), kept as an oracle: the tests
// compare the two on whole runs, separators and row breaks included. Its
// own comments describe it as it was.
func appendFloat32sV1(dst, le []byte, row, col int) []byte {
	// The window one value is written into: "-0.000" + 9 digits, "], [".
	const most = 19
	n := len(dst)
	last := len(le)&^3 - 4 // offset of the last value
	for j := 0; j <= last; j += 4 {
		if cap(dst)-n < most {
			dst = slices.Grow(dst[:n], (last-j)/4*most+most)
		}
		dst = dst[:cap(dst)]
		b := binary.LittleEndian.Uint32(le[j:])
		// The separator after this value, as a little-endian word, and
		// its length if a value follows.
		sep, more := uint32(' '<<8|','), 2
		if col++; col == row {
			sep, col, more = '['<<24|' '<<16|','<<8|']', 0, 4
		}
		if j == last {
			more = 0
		}
		var d, margin uint64
		var exp int
		ok := false
		if e := b >> 23 & 0xFF; e != 0 && e != 0xFF {
			// float32Digits' common case written out (V = m*5^k / 2^s,
			// s in 1…63, no decade carried): a call per value, with the
			// loop's registers saved around it, cost a tenth of a
			// response. appendFloat32Other calls float32Digits for the
			// rest; the oracle tests compare every output byte.
			m := uint64(b&0x7FFFFF | 0x800000)
			q := int(e) - 150
			exp = log10Pow2(q+23) + int(bitIf(m >= uint64(decadeStart[e])))
			k := 8 - exp
			if s := uint(-(q + k)); uint(k) < uint(len(pow5)) && s-1 < 63 {
				hi, lo := bits.Mul64(m, pow5[k])
				v := hi<<((64-s)&63) | lo>>(s&63)
				d = v + (lo&(1<<(s&63)-1)+(1<<((s-1)&63)-1)+v&1)>>(s&63)
				margin = pow5[k]>>(s+1) + 2
				ok = v >= 100_000_000 && d < 1_000_000_000
			}
		}
		if t := d % 1000; !ok || t < margin || t > 1000-margin || exp < -4 || exp >= 9 {
			dst = appendFloat32Other(dst[:n], b)
			dst = binary.LittleEndian.AppendUint32(dst, sep)[:len(dst)+more]
			n = len(dst)
			continue
		}
		// Step 2 holds: D's nine digits in fixed form ("0.000ddd" or
		// "ddd.ddd"), where nearly every value of a real tensor falls.
		w := dst[n : n+most]
		i := int(b >> 31) // the sign
		w[0] = '-'
		lead := byte('0' + d/100_000_000)
		raw := bits.ReverseBytes64(eightDigitsRev(uint32(d % 100_000_000)))
		tz := bits.LeadingZeros64(raw) >> 3 // zero digits ending the last eight (the lead is not zero)
		digits := raw | 0x3030_3030_3030_3030
		if exp < 0 { // "0." and -exp-1 zeros, then the digits
			binary.LittleEndian.PutUint64(w[i:], 0x3030_3030_3030_2e30) // "0.000000"
			i += 1 - exp
			w[i] = lead
			binary.LittleEndian.PutUint64(w[i+1:], digits)
			i += 9 - tz
		} else {
			// "ddd.ddd": exp+1 integer digits, 8-exp fraction digits, of
			// which the trailing zeros are dropped, keeping at least ".0".
			w[i] = lead
			binary.LittleEndian.PutUint64(w[i+1:], digits)
			point := i + exp + 1
			copy(w[point+1:i+10], w[point:i+9])
			w[point] = '.'
			if tz < 8-exp {
				i += 10 - tz
			} else {
				w[point+1] = '0'
				i = point + 2
			}
		}
		binary.LittleEndian.PutUint32(w[i:], sep)
		n += i + more
	}
	return dst[:n]
}
