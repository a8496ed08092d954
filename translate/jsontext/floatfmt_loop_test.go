package jsontext

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestF32Scales checks every decade appendFloat32s writes itself
// (f32Scales): at both ends of the decade's mantissas, on both sides of
// its start (decadeStart) and at random mantissas in between, the decade
// chosen and D agree with strconv's correctly rounded %.9g digits, and the
// margin with float32Digits'. The decade test and D are monotonic in the
// mantissa, so the ends decide the whole decade. A decade left to
// appendFloat32Other must lie outside [1e-4, 1e9), where the loop is
// meant to write every normal float32.
func TestF32Scales(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	filled := 0
	for e := uint32(1); e < 255; e++ {
		sc := &f32Scales[e]
		start := min(decadeStart[e], 1<<24)
		for up := range uint(2) {
			lo, hi := uint32(1<<23), start-1
			if up == 1 {
				lo, hi = max(start, 1<<23), 1<<24-1
			}
			if lo > hi {
				continue // the binade has one decade
			}
			f := func(m uint32) float64 { return float64(math.Float32frombits(e<<23 | m&0x7FFFFF)) }
			if sc[up].lowMargin == 1 {
				if f(hi) >= 1e-4 && f(lo) < 1e9 {
					t.Errorf("e %d decade %d: [%g, %g] not written by the loop", e, up, f(lo), f(hi))
				}
				continue
			}
			filled++
			ms := []uint32{lo, lo + 1, hi - 1, hi}
			for range 50 {
				ms = append(ms, lo+r.Uint32N(hi-lo+1))
			}
			for _, m := range ms {
				b := e<<23 | m&0x7FFFFF
				d, gotUp := sc.digits(b)
				if gotUp != up {
					t.Fatalf("%g (e %d, m %#x): decade %d, want %d", f(m), e, m, gotUp, up)
				}
				exp := int(sc[up].exp)
				if d == 1_000_000_000 { // rounded up a decade (the loop takes it to step 3)
					d, exp = 100_000_000, exp+1
				}
				wd, wexp := strconvDigits(f(m), 32, 9)
				if uint64(d) != wd || exp != wexp {
					t.Fatalf("%g: D %d e%d, strconv %d e%d", f(m), d, exp, wd, wexp)
				}
				if _, _, margin, ok := float32Digits(b); !ok || margin != sc[up].lowMargin/mod1000 {
					t.Fatalf("%g: margin %d, float32Digits %d (%v)", f(m), sc[up].lowMargin/mod1000, margin, ok)
				}
			}
		}
	}
	// [1e-4, 1e9) is cut by binades and decades into 55 pieces.
	t.Logf("%d decades written by the loop", filled)
	if filled < 55 {
		t.Fatalf("only %d decades written by the loop", filled)
	}
}

// TestFloat32sRuns compares appendFloat32s on whole runs (separators, list
// ends at every column, runs longer than its block) with the literal
// oracle, value by value, and with the loop it replaced
// (appendFloat32sV1): 10M values (300k with -short) mixing random bit
// patterns, image-like values in [0,1), short decimals (the %.6g side),
// and the edge values (powers of ten and their neighbours, subnormals,
// extremes, decade and notation switches).
func TestFloat32sRuns(t *testing.T) {
	total := 10_000_000
	if testing.Short() {
		total = 300_000
	}
	r := rand.New(rand.NewPCG(11, 12))
	edges := edgeFloat64s()
	var le, want []byte
	var vals []float32
	for done := 0; done < total; {
		n := r.IntN(1500)
		row := r.IntN(6)
		col := 0
		if row > 0 {
			col = r.IntN(row)
		}
		le, vals = le[:0], vals[:0]
		for range n {
			var v float32
			switch r.IntN(8) {
			case 0, 1:
				v = math.Float32frombits(r.Uint32())
			case 2, 3, 4:
				v = r.Float32()
			case 5, 6:
				v = float32(shortDecimal(r))
			default:
				v = float32(edges[r.IntN(len(edges))])
			}
			vals = append(vals, v)
			le = binary.LittleEndian.AppendUint32(le, math.Float32bits(v))
		}
		want = append(want[:0], 'x')
		for i, v := range vals {
			if i > 0 {
				if row > 0 && (col+i)%row == 0 {
					want = append(want, "], ["...)
				} else {
					want = append(want, ", "...)
				}
			}
			want = append(want, oracle32(v)...)
		}
		got := appendFloat32s([]byte("x"), le, row, col)
		if !bytes.Equal(got, want) {
			for i, v := range vals { // name the first value that differs
				if one := string(AppendFloat32(nil, v)); one != oracle32(v) {
					t.Fatalf("value %d (%#08x): %q, oracle %q", i, math.Float32bits(v), one, oracle32(v))
				}
			}
			t.Fatalf("run of %d (row %d, col %d):\n got %q\nwant %q", n, row, col, got, want)
		}
		if v1 := appendFloat32sV1([]byte("x"), le, row, col); !bytes.Equal(got, v1) {
			t.Fatalf("run of %d (row %d, col %d) differs from appendFloat32sV1:\n got %q\n  v1 %q", n, row, col, got, v1)
		}
		done += n
	}
}

// FuzzFloat32s compares appendFloat32s with the loop it replaced
// (appendFloat32sV1) and with the literal oracle on runs of arbitrary
// bit patterns, list lengths and starting columns.
func FuzzFloat32s(f *testing.F) {
	seed := []byte{}
	for _, v := range []float32{0.1, 1, 9.999999e-5, 1e-4, 0.099999994, 999999.94, 1e9, -0.5, 123456.79, 3e-45} {
		seed = binary.LittleEndian.AppendUint32(seed, math.Float32bits(v))
	}
	f.Add(seed, uint8(3), uint8(1))
	f.Add(seed, uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, le []byte, row, col uint8) {
		r, c := int(row%8), 0
		if r > 0 {
			c = int(col) % r
		}
		got := appendFloat32s([]byte("x"), le, r, c)
		if v1 := appendFloat32sV1([]byte("x"), le, r, c); !bytes.Equal(got, v1) {
			t.Fatalf("row %d col %d:\n got %q\n  v1 %q", r, c, got, v1)
		}
		want := []byte("x")
		for i := 0; i+4 <= len(le); i += 4 {
			if i > 0 {
				if r > 0 && (c+i/4)%r == 0 {
					want = append(want, "], ["...)
				} else {
					want = append(want, ", "...)
				}
			}
			want = append(want, oracle32(math.Float32frombits(binary.LittleEndian.Uint32(le[i:])))...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("row %d col %d:\n got %q\nwant %q", r, c, got, want)
		}
	})
}

// TestSettledLow: the loop's step 2 test on D*mod1000's low bits agrees
// with margin <= D%1000 <= 1000-margin for every margin a decade can
// have, every last three digits and the smallest and largest D/1000,
// and no D passes the test of a decade the loop does not write (margin 0
// here: lowMargin 1, lowSpan 0).
func TestSettledLow(t *testing.T) {
	margins := map[uint64]bool{0: true}
	for e := range f32Scales {
		for up := range 2 {
			margins[f32Scales[e][up].lowMargin/mod1000] = true
		}
	}
	for m := uint64(2); m <= 61; m++ {
		margins[m] = true
	}
	for margin := range margins {
		lowMargin, lowSpan := settledLow(margin)
		if margin == 0 {
			lowMargin, lowSpan = 1, 0
		}
		for _, q := range []uint64{0, 1, 2, 383, 499_999, 999_998, 999_999} {
			for tail := range uint64(1000) {
				d := q*1000 + tail
				want := margin != 0 && margin <= tail && tail <= 1000-margin
				if got := d*mod1000-lowMargin <= lowSpan; got != want {
					t.Fatalf("margin %d, D %d: settled %v, want %v", margin, d, got, want)
				}
			}
		}
	}
}

// decadeStart[e] (the tests' decade boundaries) is the smallest 24-bit mantissa m for which a float32
// with biased exponent e is at least 10^(log10Pow2(e-127)+1): below it the
// decimal exponent is log10Pow2(e-127), from it one more (2^24 when the
// next power of ten is out of reach). Computed exactly with math/big.
var decadeStart = func() (t [256]uint32) {
	for e := 1; e < 255; e++ {
		q := e - 150
		r := pow10Rat(log10Pow2(q+23) + 1) // m >= 10^p10 / 2^q = r
		r.Mul(r, new(big.Rat).SetFloat64(math.Ldexp(1, -q)))
		num, den := new(big.Int).Set(r.Num()), r.Denom()
		num.Add(num, den).Sub(num, big.NewInt(1)).Quo(num, den) // ceiling
		t[e] = uint32(min(num.Uint64(), 1<<24))
	}
	return t
}()

// pow5 holds 5^0 .. 5^27, the powers below 2^63 (the v1 loop's).
var pow5 = func() (p [28]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 5
	}
	return p
}()
