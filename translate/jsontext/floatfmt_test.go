package jsontext

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
)

// oracleFloat is TF Serving's WriteDecimal done literally (docs/tfserving-rest.md §5.2): the
// original implementation, kept as the reference the fast one must match
// byte for byte. The doc records it as identical to glibc %.6g/%.9g/%.17g +
// strtof/strtod on 600k values.
func oracleFloat(dst []byte, v float64, bits, fallback int) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	case math.IsInf(v, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(v, -1):
		return append(dst, "-Infinity"...)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, v, 'g', 6, 64)
	if back, err := strconv.ParseFloat(string(dst[start:]), bits); err != nil || back != v {
		dst = strconv.AppendFloat(dst[:start], v, 'g', fallback, 64)
	}
	for _, c := range dst[start:] {
		if c == '.' || c == 'e' {
			return dst
		}
	}
	return append(dst, '.', '0')
}

func oracle32(f float32) string { return string(oracleFloat(nil, float64(f), 32, 9)) }
func oracle64(d float64) string { return string(oracleFloat(nil, d, 64, 17)) }

func check32(t *testing.T, f float32) {
	t.Helper()
	if got, want := string(AppendFloat32(nil, f)), oracle32(f); got != want {
		t.Fatalf("AppendFloat32(%#08x = %g) = %q, oracle %q", math.Float32bits(f), f, got, want)
	}
}

func check64(t *testing.T, d float64) {
	t.Helper()
	if got, want := string(AppendFloat64(nil, d)), oracle64(d); got != want {
		t.Fatalf("AppendFloat64(%#016x = %g) = %q, oracle %q", math.Float64bits(d), d, got, want)
	}
}

// TestFloatExamples pins docs/tfserving-rest.md's §5.2 examples and a few more by hand,
// so a bug shared by the oracle and the fast path still fails.
func TestFloatExamples(t *testing.T) {
	f32 := []struct {
		in   float32
		want string
	}{
		{0.1, "0.1"}, {0.2, "0.2"}, {2.5, "2.5"}, {3, "3.0"}, {100, "100.0"},
		{123456, "123456.0"}, {1234567, "1234567.0"}, {1e6, "1e+06"}, {9000000, "9e+06"},
		{0.00003, "3e-05"}, {0.0003, "0.0003"}, {555557.5, "555557.5"},
		{0.1234567, "0.123456702"}, {1.0 / 3, "0.333333343"}, {1435774336, "1.43577434e+09"},
		{float32(math.Copysign(0, -1)), "-0.0"}, {0, "0.0"}, {math.MaxFloat32, "3.40282347e+38"},
		{999999, "999999.0"}, {999999.5, "999999.5"}, {1e-07, "1e-07"}, {16777216, "16777216.0"},
		{-1.5, "-1.5"}, {0.0001, "0.0001"}, {0.00001, "1e-05"}, {123456.7, "123456.703"},
		{1e38, "1e+38"}, {-2e-38, "-2e-38"},
		{math.SmallestNonzeroFloat32, "1.4013e-45"}, // subnormal: shortest is "1e-45", yet %.6g round-trips
		{0x1.8p-148, "4.2039e-45"}, {0x1.fffffcp-127, "1.17549421e-38"}, {0x1p-126, "1.17549435e-38"},
		{float32(math.NaN()), "NaN"}, {float32(math.Inf(1)), "Infinity"}, {float32(math.Inf(-1)), "-Infinity"},
	}
	for _, c := range f32 {
		if got := string(AppendFloat32([]byte("x"), c.in)); got != "x"+c.want {
			t.Errorf("AppendFloat32(%g) = %q, want %q", c.in, got[1:], c.want)
		}
	}
	tenth, fifth := 0.1, 0.2
	f64 := []struct {
		in   float64
		want string
	}{
		{0.1, "0.1"}, {tenth + fifth, "0.30000000000000004"}, {1.0 / 3, "0.33333333333333331"},
		{1e21, "1e+21"}, {123456789012, "123456789012.0"}, {5e-324, "4.94066e-324"},
		{8, "8.0"}, {math.MaxFloat64, "1.7976931348623157e+308"}, {1e308, "1e+308"},
		{2.2250738585072014e-308, "2.2250738585072014e-308"}, {math.Copysign(0, -1), "-0.0"},
		{math.NaN(), "NaN"}, {math.Inf(-1), "-Infinity"},
	}
	for _, c := range f64 {
		if got := string(AppendFloat64(nil, c.in)); got != c.want {
			t.Errorf("AppendFloat64(%g) = %q, want %q", c.in, got, c.want)
		}
	}
}

// edgeFloat64s are the values where %g formatting and round-trip decisions
// change: zeros, subnormals, the normal boundary, every power of ten, the
// 1e6 and 1e-4 notation switches, 6-digit rounding carries, extremes.
func edgeFloat64s() []float64 {
	vs := []float64{0, math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64,
		math.MaxFloat32, math.SmallestNonzeroFloat32, 0x1p-126, 0x1p-1022, 0x1p-149, 0x1.fffffcp-127,
		0x1.ffffffffffffep-1023, 999999, 999999.5, 999999.4, 999999.6, 999999.9, 1e6 - 0.0625,
		1000000.5, 1000001, 9999995, 9999994.9, 0.99999949, 0.9999995, 0.99999951, 9.999995e-5,
		0.000099999, 0.0001, 0.00009999995, 123456.5, 123456.49, 16777217, 1<<53 + 1,
		0.5, 1.5, 2.5, 262143.0625, 1048575.25}
	for e := -325; e <= 309; e++ {
		p := math.Pow(10, float64(e))
		vs = append(vs, p, math.Nextafter(p, 0), math.Nextafter(p, math.Inf(1)),
			float64(float32(p)), float64(math.Nextafter32(float32(p), 0)), float64(math.Nextafter32(float32(p), float32(math.Inf(1)))))
	}
	for i := 0; i < 64; i++ { // powers of two across the whole range
		vs = append(vs, math.Ldexp(1, i*33-1074), math.Ldexp(1, i*5-149))
	}
	n := len(vs)
	for _, v := range vs[:n] {
		vs = append(vs, -v)
	}
	return vs
}

func TestFloatEdgeCases(t *testing.T) {
	for _, v := range edgeFloat64s() {
		check64(t, v)
		check32(t, float32(v))
	}
	// All float32 subnormals near both ends, and the first normals.
	for b := uint32(0); b < 1<<16; b++ {
		check32(t, math.Float32frombits(b))
		check32(t, math.Float32frombits(0x00800000-b))
		check32(t, math.Float32frombits(0x00800000+b))
	}
}

// TestFloat32Random compares the fast path with the oracle on 1M random
// float32 bit patterns, 1M image-like values in [0,1) and 1M values built
// from short decimals (the ≤ 6 digit path that random bits rarely hit).
func TestFloat32Random(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 50_000
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range n {
		check32(t, math.Float32frombits(r.Uint32()))
		check32(t, r.Float32())
		check32(t, float32(shortDecimal(r)))
	}
}

// TestFloat64Random does the same for float64.
func TestFloat64Random(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 50_000
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range n {
		check64(t, math.Float64frombits(r.Uint64()))
		check64(t, r.Float64())
		check64(t, shortDecimal(r))
	}
}

// shortDecimal returns a decimal of 1 to 8 significant digits with a
// random exponent (so both sides of the 6-digit rule are exercised).
func shortDecimal(r *rand.Rand) float64 {
	digits := 1 + r.IntN(8)
	m := r.Int64N(int64(math.Pow10(digits)))
	e := r.IntN(90) - 45
	if r.IntN(10) == 0 {
		e = r.IntN(640) - 330
	}
	v, _ := strconv.ParseFloat(strconv.FormatInt(m, 10)+"e"+strconv.Itoa(e), 64)
	if r.IntN(2) == 0 {
		v = -v
	}
	return v
}

// TestFloat32Sweep walks float32 bit patterns with a stride (every
// exponent, evenly spread mantissas). TFSBRIDGE_FLOAT_STRIDE=1 makes it
// exhaustive over all 2^31 positive patterns (minutes; run by hand after
// touching this file; negatives only differ by the sign branch).
func TestFloat32Sweep(t *testing.T) {
	stride := uint64(1) << 14
	if s := os.Getenv("TFSBRIDGE_FLOAT_STRIDE"); s != "" {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil || n == 0 {
			t.Fatalf("bad TFSBRIDGE_FLOAT_STRIDE %q", s)
		}
		stride = n
	}
	for b := uint64(0); b < 1<<31; b += stride {
		check32(t, math.Float32frombits(uint32(b)))
	}
}

// TestLog10Pow2 checks the integer approximation float32Digits relies on
// over every normal float32 binary exponent.
func TestLog10Pow2(t *testing.T) {
	for p := -126; p <= 127; p++ {
		if got, want := log10Pow2(p), int(math.Floor(float64(p)*math.Log10(2))); got != want {
			t.Errorf("floor(%d*log10(2)) = %d, approximation gives %d", p, want, got)
		}
	}
}

// TestFloat32DigitsCoverage checks float32Digits on every normal float32
// exponent, at both ends of the mantissas, around the decade boundary and
// at random mantissas: D and the decade agree with strconv's correctly
// rounded %.9g digits, the margin is floor(ulp(x)/2) in D's units plus 2
// (computed exactly) or one more, and ok is false only rarely (it makes
// the value slower, never different).
func TestFloat32DigitsCoverage(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	misses, total := 0, 0
	for e := uint32(1); e < 255; e++ {
		ms := []uint32{1 << 23, 1<<24 - 1, 0xABCDEF}
		if s := decadeStart[e]; s > 1<<23 && s < 1<<24 {
			ms = append(ms, s-1, s)
		}
		for range 2000 {
			ms = append(ms, 1<<23|r.Uint32N(1<<23))
		}
		for _, m := range ms {
			b := e<<23 | m&0x7FFFFF
			f := math.Float32frombits(b)
			d, exp, margin, ok := float32Digits(b)
			total++
			if !ok {
				misses++
				continue
			}
			wd, wexp := strconvDigits(float64(f), 32, 9)
			// floor(2^(q-1) * 10^(8-exp)) exactly.
			h := new(big.Rat).Mul(new(big.Rat).SetFloat64(math.Ldexp(1, int(e)-151)), pow10Rat(8-exp))
			floor := new(big.Int).Quo(h.Num(), h.Denom()).Uint64()
			if d != wd || exp != wexp || margin < floor+2 || margin > floor+3 || margin > 61 {
				t.Errorf("float32Digits(%g) = %d e%d margin %d, strconv %d e%d, margin %d", f, d, exp, margin, wd, wexp, floor+2)
			}
		}
	}
	if misses*1000 > total {
		t.Errorf("float32Digits left %d of %d values to strconv", misses, total)
	}
}

func FuzzAppendFloat(f *testing.F) {
	for _, v := range edgeFloat64s()[:60] {
		f.Add(math.Float64bits(v), math.Float32bits(float32(v)))
	}
	f.Fuzz(func(t *testing.T, b64 uint64, b32 uint32) {
		check64(t, math.Float64frombits(b64))
		check32(t, math.Float32frombits(b32))
	})
}

// TestFloatConformance checks the float tokens of every response vector
// whose single output is DT_FLOAT or DT_DOUBLE against the expected text.
func TestFloatConformance(t *testing.T) {
	token := regexp.MustCompile(`-?(?:NaN|Infinity|[0-9][0-9.e+-]*)`)
	checked := 0
	for _, c := range conformance.MustLoad(t, "tfserving_cases.json") {
		if c.Direction != "response" {
			continue
		}
		var in struct {
			Outputs []struct {
				DType  string            `json:"dtype"`
				Values []json.RawMessage `json:"values"`
			} `json:"output_tensors"`
		}
		var exp struct {
			JSONText string `json:"json_text"`
		}
		conformance.Decode(t, c.Input, &in)
		conformance.Decode(t, c.Expected, &exp)
		if len(in.Outputs) != 1 || exp.JSONText == "" {
			continue
		}
		o := in.Outputs[0]
		if o.DType != "DT_FLOAT" && o.DType != "DT_DOUBLE" {
			continue
		}
		want := token.FindAllString(exp.JSONText, -1)
		if len(want) != len(o.Values) {
			t.Fatalf("%s: %d number tokens in json_text, %d values", c.ID, len(want), len(o.Values))
		}
		for i, raw := range o.Values {
			var got string
			if o.DType == "DT_FLOAT" {
				got = string(AppendFloat32(nil, float32(conformance.MustFloat(t, raw, 32))))
			} else {
				got = string(AppendFloat64(nil, conformance.MustFloat(t, raw, 64)))
			}
			if got != want[i] {
				t.Errorf("%s: value %d (%s) = %q, want %q", c.ID, i, raw, got, want[i])
			}
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("only %d float values checked: vectors missing?", checked)
	}
}

func BenchmarkAppendFloat32(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	vals := make([]float32, 4096)
	for i := range vals {
		vals[i] = r.Float32()
	}
	buf := make([]byte, 0, 64)
	b.Run("fast", func(b *testing.B) {
		for i := range b.N {
			buf = AppendFloat32(buf[:0], vals[i&4095])
		}
	})
	b.Run("oracle", func(b *testing.B) {
		for i := range b.N {
			buf = oracleFloat(buf[:0], float64(vals[i&4095]), 32, 9)
		}
	})
}

// sixDigitsRoundTrip's float-arithmetic path agrees with strconv.ParseFloat
// for every exponent it covers, on the parsed value itself and on its
// neighbours (which must not round-trip).
func TestSixDigitsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for _, c := range []struct{ bits, maxE int }{{32, 12}, {64, 24}} {
		for e := -c.maxE; e <= c.maxE; e++ {
			for range 2000 {
				d6 := 100_000 + r.Uint64N(900_000)
				text := strconv.FormatUint(d6, 10) + "e" + strconv.Itoa(e)
				exact, err := strconv.ParseFloat(text, c.bits)
				if err != nil {
					t.Fatal(err)
				}
				near := []float64{exact, math.Nextafter(exact, 0), math.Nextafter(exact, math.Inf(1))}
				if c.bits == 32 {
					x := float32(exact)
					near[1], near[2] = float64(math.Nextafter32(x, 0)), float64(math.Nextafter32(x, float32(math.Inf(1))))
				}
				for i, a := range near {
					if got := sixDigitsRoundTrip(a, d6, e, c.bits); got != (i == 0) {
						t.Fatalf("bits %d: sixDigitsRoundTrip(%v, %s) = %v, want %v", c.bits, a, text, got, i == 0)
					}
				}
			}
		}
	}
}

// TestEightDigits checks the lane arithmetic against digit-by-digit
// division: every value below 10^6 and around every power of ten, and a
// stride through the rest (the whole range passed once, in a second).
func TestEightDigits(t *testing.T) {
	check := func(v uint32) {
		var got, want [8]byte
		binary.LittleEndian.PutUint64(got[:], bits.ReverseBytes64(eightDigitsRev(v))|0x3030_3030_3030_3030)
		for i, x := 7, v; i >= 0; i, x = i-1, x/10 {
			want[i] = byte('0' + x%10)
		}
		if got != want {
			t.Fatalf("eightDigits(%d) = %q", v, got)
		}
	}
	for v := uint32(0); v < 1_000_000; v++ {
		check(v)
	}
	for p := uint32(10); p <= 100_000_000; p *= 10 {
		for v := p - 1000; v < p+1000 && v < 100_000_000; v++ {
			check(v)
		}
	}
	for v := uint32(1_000_000); v < 100_000_000; v += 997 {
		check(v)
	}
}

// BenchmarkFloat32sImage is ResponseImage's inner loop alone: the
// 1x224x224x3 values in [0,1) of translate's benchmark (same generator and
// seed) written as rows of three. MB/s is output bytes per second.
func BenchmarkFloat32sImage(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 11))
	le := make([]byte, 0, 4*224*224*3)
	for range 224 * 224 * 3 {
		le = binary.LittleEndian.AppendUint32(le, math.Float32bits(r.Float32()))
	}
	for _, c := range []struct {
		name string
		f    func(dst, le []byte, row, col int) []byte
	}{{"v1", appendFloat32sV1}, {"current", appendFloat32s}} {
		b.Run(c.name, func(b *testing.B) {
			buf := c.f(nil, le, 3, 0)
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				buf = c.f(buf[:0], le, 3, 0)
			}
		})
	}
}

// BenchmarkFloat32sExpForm is an answer made of float32 values TF prints
// in exponent form (appendFloat32Other's digits for each), as rows of
// three: small ones (|x| < 1e-4, such as a gradient or a probability far
// from the top class) and large ones (|x| >= 1e9).
func BenchmarkFloat32sExpForm(b *testing.B) {
	for _, c := range []struct {
		name  string
		scale float64
	}{{"small", 1e-7}, {"large", 1e12}} {
		r := rand.New(rand.NewPCG(7, 13))
		le := make([]byte, 0, 4*65536)
		for range 65536 {
			v := float32(r.Float64() * c.scale * math.Pow(10, float64(r.IntN(8))-4))
			le = binary.LittleEndian.AppendUint32(le, math.Float32bits(v))
		}
		b.Run(c.name, func(b *testing.B) {
			buf := appendFloat32s(nil, le, 3, 0)
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				buf = appendFloat32s(buf[:0], le, 3, 0)
			}
		})
	}
}
