package jsontext

import (
	"math"
	"math/big"
	"math/bits"
)

// Grisu2 as rapidjson 1.1.0's internal/dtoa.h implements it (Loitsch
// 2010), not strconv's shortest formatting: Grisu2 is not always shortest
// and closest, and TF Serving's error messages print its digits. Only
// error paths use it.

// diyFp is a "do it yourself" float: f × 2^e.
type diyFp struct {
	f uint64
	e int
}

const (
	dpHiddenBit = 1 << 52
	dpSigMask   = dpHiddenBit - 1
)

func diyFpOf(d float64) diyFp {
	u := math.Float64bits(d)
	biased := int(u>>52) & 0x7FF
	sig := u & dpSigMask
	if biased != 0 {
		return diyFp{sig + dpHiddenBit, biased - 1075}
	}
	return diyFp{sig, -1074}
}

// mul is the 64×64 product's upper half, rounded half up at bit 63.
func (x diyFp) mul(y diyFp) diyFp {
	h, l := bits.Mul64(x.f, y.f)
	if l>>63 != 0 {
		h++
	}
	return diyFp{h, x.e + y.e + 64}
}

func (x diyFp) normalize() diyFp {
	s := bits.LeadingZeros64(x.f)
	return diyFp{x.f << s, x.e - s}
}

// boundaries returns the normalized lower and upper boundaries of x.
func (x diyFp) boundaries() (minus, plus diyFp) {
	// rapidjson's NormalizeBoundary, which shifts bit by bit up to bit 53,
	// then by 10: the top bit at 63, as normalize puts it.
	plus = diyFp{x.f<<1 + 1, x.e - 1}.normalize()
	if x.f == dpHiddenBit {
		minus = diyFp{x.f<<2 - 1, x.e - 2}
	} else {
		minus = diyFp{x.f<<1 - 1, x.e - 1}
	}
	minus.f <<= uint(minus.e - plus.e)
	minus.e = plus.e
	return minus, plus
}

// cachedPowers holds 10^(-348+8i), i = 0…86, as normalized 64-bit
// significands rounded to nearest with their binary exponents: Grisu's
// table, computed exactly instead of transcribed.
var cachedPowers = func() (t [87]diyFp) {
	for i := range t {
		f := new(big.Float).SetPrec(64).SetMode(big.ToNearestEven).SetRat(pow10Rat(-348 + 8*i))
		mant := new(big.Float)
		exp := f.MantExp(mant) // f = mant × 2^exp, mant in [0.5, 1)
		mant.SetMantExp(mant, 64)
		u, _ := mant.Uint64()
		t[i] = diyFp{u, exp - 64}
	}
	return t
}()

// cachedPower is rapidjson's GetCachedPower: the cached power that brings
// a number with binary exponent e into Grisu's working range, and its
// decimal exponent K.
func cachedPower(e int) (diyFp, int) {
	dk := float64(float64(-61-e)*0.30102999566398114) + 347
	k := int(dk)
	if dk-float64(k) > 0 {
		k++
	}
	index := k>>3 + 1
	return cachedPowers[index], -(-348 + index<<3)
}

func grisuRound(buf []byte, delta, rest, tenKappa, wpw uint64) {
	for rest < wpw && delta-rest >= tenKappa && (rest+tenKappa < wpw || wpw-rest > rest+tenKappa-wpw) {
		buf[len(buf)-1]--
		rest += tenKappa
	}
}

// digitGen generates the digits of Mp within delta and returns how many it
// wrote to buf and the adjusted decimal exponent.
func digitGen(w, mp diyFp, delta uint64, buf []byte, k int) (int, int) {
	one := diyFp{1 << uint(-mp.e), mp.e}
	wpw := mp.f - w.f
	p1 := uint32(mp.f >> uint(-one.e))
	p2 := mp.f & (one.f - 1)
	kappa := 9 // p1's decimal digits (rapidjson's CountDecimalDigit32)
	for kappa > 1 && uint64(p1) < pow10u[kappa-1] {
		kappa--
	}
	n := 0
	for kappa > 0 {
		div := uint32(pow10u[kappa-1])
		d := p1 / div
		p1 %= div
		if d != 0 || n != 0 {
			buf[n] = byte('0' + d)
			n++
		}
		kappa--
		tmp := uint64(p1)<<uint(-one.e) + p2
		if tmp <= delta {
			k += kappa
			grisuRound(buf[:n], delta, tmp, pow10u[kappa]<<uint(-one.e), wpw)
			return n, k
		}
	}
	for {
		p2 *= 10
		delta *= 10
		d := byte(p2 >> uint(-one.e))
		if d != 0 || n != 0 {
			buf[n] = '0' + d
			n++
		}
		p2 &= one.f - 1
		kappa--
		if p2 < delta {
			k += kappa
			// rapidjson 1.1.0 reads kPow10 out of bounds when kappa < -9;
			// later releases use 0 there, as here.
			var scale uint64
			if -kappa < 9 {
				scale = pow10u[-kappa]
			}
			grisuRound(buf[:n], delta, p2, one.f, wpw*scale)
			return n, k
		}
	}
}

// grisu2 writes the digits of a positive finite v to buf and returns their
// count and the decimal exponent: v ≈ digits × 10^k.
func grisu2(v float64, buf []byte) (int, int) {
	x := diyFpOf(v)
	wm, wp := x.boundaries()
	cmk, k := cachedPower(wp.e)
	w := x.normalize().mul(cmk)
	wp = wp.mul(cmk)
	wm = wm.mul(cmk)
	wm.f++
	wp.f--
	return digitGen(w, wp, wp.f-wm.f, buf, k)
}

// pow10Rat returns 10^k exactly.
func pow10Rat(k int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(k, -k))), nil)
	if k < 0 {
		return new(big.Rat).SetFrac(big.NewInt(1), p)
	}
	return new(big.Rat).SetInt(p)
}
