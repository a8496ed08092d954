package jsontext

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestNormalPrecisionMatchesStrtodShort: rapidjson's normal-precision path
// is correctly rounded for plain decimals of up to 15 significant digits
// (docs/tfserving-rest.md §3), so it must agree with strconv there.
func TestNormalPrecisionMatchesStrtodShort(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 200000; i++ {
		digits := 1 + r.IntN(15)
		s := strconv.FormatInt(r.Int64N(int64(math.Pow10(digits))), 10)
		switch f := r.IntN(len(s) + 1); f {
		case 0:
			s += ".0"
		case len(s):
			s = "0." + s
		default:
			s = s[:len(s)-f] + "." + s[len(s)-f:]
		}
		end, flags, bits, err := parseNumber([]byte(s), 0)
		if err != nil || end != len(s) || flags != flagDouble {
			t.Fatalf("%s: end %d flags %b err %v", s, end, flags, err)
		}
		want, _ := strconv.ParseFloat(s, 64)
		if math.Float64frombits(bits) != want {
			t.Fatalf("%s: got %v, want %v", s, math.Float64frombits(bits), want)
		}
	}
}

// TestNormalPrecisionIsNotCorrectlyRounded pins the known 1-ULP
// differences of rapidjson's fast path (docs/tfserving-rest.md §3), which DT_DOUBLE inputs
// observe.
func TestNormalPrecisionIsNotCorrectlyRounded(t *testing.T) {
	tests := []struct {
		in   string
		bits uint64
	}{
		{"1234.5678901234567", 0x40934a4584fd0fe0}, // strtod: …fdf
	}
	for _, tt := range tests {
		_, _, bits, err := parseNumber([]byte(tt.in), 0)
		if err != nil || bits != tt.bits {
			t.Errorf("%s: %#x %v, want %#x", tt.in, bits, err, tt.bits)
		}
		correct, _ := strconv.ParseFloat(tt.in, 64)
		if math.Float64bits(correct) == tt.bits {
			t.Errorf("%s: example no longer differs from strtod", tt.in)
		}
	}
}

// TestFloat32OfSevenDigits: what a DT_FLOAT input stores for 7-digit
// values equals float32(correct double) (docs/tfserving-rest.md §3: float32 results matched
// correct rounding in 400k samples).
func TestFloat32OfSevenDigits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 100000; i++ {
		s := strconv.FormatFloat(r.Float64()*math.Pow10(r.IntN(20)-10), 'g', 7, 64)
		_, flags, bits, err := parseNumber([]byte(s), 0)
		if err != nil {
			t.Fatal(err)
		}
		n := node{kind: Number, flags: flags, bits: bits}
		want, _ := strconv.ParseFloat(s, 64)
		if float32(n.float64()) != float32(want) {
			t.Fatalf("%s: %v, want %v", s, float32(n.float64()), float32(want))
		}
	}
}

func TestPow10Table(t *testing.T) {
	for i, p := range pow10 {
		want, _ := strconv.ParseFloat("1e"+strconv.Itoa(i), 64)
		if p != want {
			t.Fatalf("pow10[%d] = %v, want %v", i, p, want)
		}
	}
}
