package jsontext

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
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
		n := Num{flags, bits}
		want, _ := strconv.ParseFloat(s, 64)
		if float32(n.Float64()) != float32(want) {
			t.Fatalf("%s: %v, want %v", s, float32(n.Float64()), float32(want))
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

// TestParseDecimal: wherever ParseDecimal answers, it answers exactly as
// ParseNumber (bits and end), over tokens around its limits.
func TestParseDecimal(t *testing.T) {
	toks := []string{"0", "-0", "1", "-1", "0.5", "-0.0", "0.1234567", "123456789012345", "1234567890123456",
		"12345678901234.5", "1234567890123.45", "1e5", "1E+5", "1e-5", "-2.5e-3", "1.5e308", "1e309", "9.99e307",
		"1e-308", "1e-309", "1.5e-300", "0.000001e-303", "1e999", "1e", "1.", "01", "-", "1.5.3", "1e5e", "4e-7", "0.12345678901234567", "0.1234567890123456789012", "9007199254740993.5",
		"0.9007199254740993", "1.7976931348623157e308", "0.00000000000000000000001234567890123456789e-300",
		"0.30000000000000004", "123.456e-2", "5e0", "7E-0", "100e-2"}
	for _, tok := range toks {
		for _, tail := range []string{",", "]", " ", ""} {
			data := []byte(tok + tail)
			f, end, ok := ParseDecimal(data, 0)
			n, wantEnd, wantOK := ParseNumber(data, 0)
			if !ok {
				continue
			}
			if end >= len(data) {
				t.Errorf("%q: answered at the end of data", tok)
			}
			if !wantOK || end != wantEnd || math.Float64bits(f) != math.Float64bits(n.Float64()) {
				t.Errorf("%q: ParseDecimal %v (end %d), ParseNumber %v (end %d, ok %v)", data, f, end, n.Float64(), wantEnd, wantOK)
			}
		}
	}
	// Random tokens of the grammar, digits counts around the limits.
	r := rand.New(rand.NewPCG(5, 6))
	digits := func(k int) string {
		b := make([]byte, k)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		return string(b)
	}
	for range 200000 {
		tok := digits(1 + r.IntN(17))
		if r.IntN(2) == 0 {
			tok += "." + strings.Repeat("0", r.IntN(3)*r.IntN(200)) + digits(1+r.IntN(25))
		}
		if r.IntN(3) == 0 {
			tok += []string{"e", "E", "e-", "e+"}[r.IntN(4)] + digits(1+r.IntN(3))
		}
		if r.IntN(2) == 0 {
			tok = "-" + tok
		}
		data := []byte(tok + ",")
		if f, end, ok := ParseDecimal(data, 0); ok {
			n, wantEnd, wantOK := ParseNumber(data, 0)
			if !wantOK || end != wantEnd || math.Float64bits(f) != math.Float64bits(n.Float64()) {
				t.Fatalf("%q: ParseDecimal %v (end %d), ParseNumber %v (end %d, ok %v)", data, f, end, n.Float64(), wantEnd, wantOK)
			}
		}
	}
	for _, tok := range []string{"0.5", "1e5", "-0.0", "123456789012345", "4e-7"} {
		if _, _, ok := ParseDecimal([]byte(tok+","), 0); !ok {
			t.Errorf("%q: not answered", tok)
		}
	}
}

// FuzzParseDecimal: wherever ParseDecimal answers, ParseNumber agrees on
// the end and on every bit of the value.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"0.1234567,", "-0.30000000000000004]", "12.5e-3 ", "0.000000001234567890123e2,", "7,"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, end, ok := ParseDecimal(data, 0)
		if !ok {
			return
		}
		n, wantEnd, wantOK := ParseNumber(data, 0)
		if !wantOK || end != wantEnd || end >= len(data) || math.Float64bits(v) != math.Float64bits(n.Float64()) {
			t.Fatalf("%q: ParseDecimal %v (end %d), ParseNumber %v (end %d, ok %v)", data, v, end, n.Float64(), wantEnd, wantOK)
		}
	})
}

// decimalWordsAgrees checks decimalWords on data (padded to its
// look-ahead) against parseDecimalBytes, the digit-by-digit path it
// replaces, and ParseNumber, rapidjson's arithmetic in full: wherever it
// answers, all three give the same end and the same bits, and it answers
// for the tokens of a tensor ("0.d…", "d.d…" without exponent).
func decimalWordsAgrees(t *testing.T, data []byte) {
	t.Helper()
	pad := append(append([]byte(nil), data...), ",                                  "...)
	f, end, ok := decimalWords(pad, 0)
	if !ok {
		return
	}
	g, gEnd, gOK := parseDecimalBytes(pad, 0)
	n, nEnd, nOK := ParseNumber(pad, 0)
	if !gOK || !nOK || end != gEnd || end != nEnd ||
		math.Float64bits(f) != math.Float64bits(g) || math.Float64bits(f) != math.Float64bits(n.Float64()) {
		t.Fatalf("%q: decimalWords %v (end %d), parseDecimalBytes %v (end %d, ok %v), ParseNumber %v (end %d, ok %v)",
			data, f, end, g, gEnd, gOK, n.Float64(), nEnd, nOK)
	}
}

// TestDecimalWords: the word-at-a-time path against the digit-by-digit
// one over the digit counts where it changes method (8, 16, 17 fraction
// digits, 15 integer digits, leading zeros), and it does answer there.
func TestDecimalWords(t *testing.T) {
	for _, tok := range []string{"0.5", "0.1234567", "0.12345678", "0.123456789", "0.1234567890123456",
		"0.12345678901234567", "0.123456789012345678901", "0.0000000000000000123", "0.00000000000000001",
		"0.0000000000000000", "0.00000000000000000000000000000000001", "-0.30000000000000004",
		"123456789012345.6", "12345678.12345678", "12345678.123456789", "9007199254740993.5", "1.5e3", "1.", "01.5",
		"0.9999999999999999999999", "-0.0", "7.25"} {
		decimalWordsAgrees(t, []byte(tok))
	}
	for _, tok := range []string{"0.1234567", "0.8444218515250481", "0.08444218515250481", "-12.5", "0.12345678901234567"} {
		if _, _, ok := decimalWords([]byte(tok+strings.Repeat(" ", decimalLookahead)), 0); !ok {
			t.Errorf("%q: not answered", tok)
		}
	}
	r := rand.New(rand.NewPCG(9, 10))
	for range 300000 {
		var tok string
		switch r.IntN(3) {
		case 0: // what clients send: float64 or float32 values in shortest or %g form
			v := r.Float64() * math.Pow10(r.IntN(8)-4)
			tok = strconv.FormatFloat(v, 'g', []int{-1, 7, 9, 17}[r.IntN(4)], 64)
		case 1:
			tok = strconv.FormatFloat(float64(r.Float32()), 'f', -1, 32)
		default: // digit strings around the limits
			b := []byte(strconv.FormatUint(1+r.Uint64N(1e15), 10))
			b = b[:1+r.IntN(len(b))]
			b = append(b, '.')
			b = append(b, strings.Repeat("0", r.IntN(3)*r.IntN(20))...)
			for range 1 + r.IntN(24) {
				b = append(b, byte('0'+r.IntN(10)))
			}
			tok = string(b)
		}
		if r.IntN(2) == 0 {
			tok = "-" + tok
		}
		decimalWordsAgrees(t, []byte(tok))
	}
}

// FuzzDecimalWords: the word-at-a-time path against the digit-by-digit one
// and ParseNumber on any input.
func FuzzDecimalWords(f *testing.F) {
	for _, s := range []string{"0.1234567", "0.8444218515250481", "0.08444218515250481", "12.5e-3", "123456789012345.6", "0.0000000000000000001"} {
		f.Add([]byte(s))
	}
	f.Fuzz(decimalWordsAgrees)
}

// appendDecimalsAgrees checks AppendDecimals on a list text against
// ParseNumber value by value: every value it takes has ParseNumber's bits
// (as float32 and as float64), it stops just after the last one it took,
// and what follows that one is its separator (or the list's end).
func appendDecimalsAgrees(t *testing.T, data []byte, limit int) {
	t.Helper()
	for _, wide := range []bool{false, true} {
		size := 4
		if wide {
			size = 8
		}
		dst := make([]byte, 0, limit*size)
		out, end, took := AppendDecimals(dst, data, 0, wide, limit)
		if took > limit || len(out) != took*size {
			t.Fatalf("%q: took %d (limit %d), wrote %d bytes", data, took, limit, len(out))
		}
		p := 0
		for i := range took {
			n, e, ok := ParseNumber(data, p)
			if !ok {
				t.Fatalf("%q: value %d at %d taken, ParseNumber refuses it", data, i, p)
			}
			want, got := n.Float64(), out[i*size:]
			if wide && binary.LittleEndian.Uint64(got) != math.Float64bits(want) ||
				!wide && binary.LittleEndian.Uint32(got) != math.Float32bits(float32(want)) {
				t.Fatalf("%q: value %d at %d differs from ParseNumber's %v", data, i, p, want)
			}
			if i == took-1 {
				if e != end {
					t.Fatalf("%q: end %d, ParseNumber's %d", data, end, e)
				}
				break
			}
			if data[e] != ',' {
				t.Fatalf("%q: went on after value %d without a comma", data, i)
			}
			p = e + 1
			if data[p] == ' ' {
				p++
			}
		}
		if took == 0 && end != 0 {
			t.Fatalf("%q: took none, end %d", data, end)
		}
	}
}

// TestAppendDecimals: lists as clients write them (", " and ","), cut at
// every kind of stop: a limit, another token, the end of the data.
func TestAppendDecimals(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 3000 {
		var b []byte
		k := 1 + r.IntN(12)
		for i := range k {
			if i > 0 {
				b = append(b, []string{", ", ",", ", ", " , ", ",  "}[r.IntN(5)]...)
			}
			v := r.Float64() * math.Pow10(r.IntN(6)-3)
			if r.IntN(2) == 0 {
				v = -v
			}
			b = strconv.AppendFloat(b, v, 'g', []int{-1, 7, 9, 17, 3}[r.IntN(5)], 64)
		}
		b = append(b, []string{"]", "], [", "]]}", ""}[r.IntN(4)]...)
		appendDecimalsAgrees(t, b, 1+r.IntN(k+2))
		appendDecimalsAgrees(t, append(b, strings.Repeat(" ", decimalLookahead)...), 1+r.IntN(k+2))
	}
	// The usual image row is taken whole.
	row := []byte("0.1234567, 0.8444218515250481, 0.08444218515250481], [0.5" + strings.Repeat(" ", decimalLookahead))
	if _, end, took := AppendDecimals(make([]byte, 0, 64), row, 0, false, 8); took != 3 || row[end] != ']' {
		t.Errorf("image row: took %d, stopped at %q", took, row[end:end+1])
	}
}

// FuzzAppendDecimals: AppendDecimals against ParseNumber on any input.
func FuzzAppendDecimals(f *testing.F) {
	f.Add([]byte("0.1234567, 0.8444218515250481,0.08444218515250481], [0.5"), uint8(5))
	f.Add([]byte("-12.5e-3, 1, 0.5 ,2"), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, limit uint8) {
		appendDecimalsAgrees(t, append(data, strings.Repeat(" ", decimalLookahead)...), int(limit))
	})
}
