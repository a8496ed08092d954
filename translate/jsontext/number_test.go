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
		n, end, err := parseNumber([]byte(s), 0)
		if err != nil || end != len(s) || n.flags != flagDouble {
			t.Fatalf("%s: end %d flags %b err %v", s, end, n.flags, err)
		}
		want, _ := strconv.ParseFloat(s, 64)
		if n.Float64() != want {
			t.Fatalf("%s: got %v, want %v", s, n.Float64(), want)
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
		n, _, err := parseNumber([]byte(tt.in), 0)
		if err != nil || n.bits != tt.bits {
			t.Errorf("%s: %#x %v, want %#x", tt.in, n.bits, err, tt.bits)
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
		n, _, err := parseNumber([]byte(s), 0)
		if err != nil {
			t.Fatal(err)
		}
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

// TestAppendDecimalsTokens: one token at a time, around the limits of
// what AppendDecimals takes, with and without room to read ahead and
// whatever follows it: wherever it takes the token, ParseNumber agrees on
// the end and on every bit (appendDecimalsAgrees), and it does take the
// tokens of a tensor.
func TestAppendDecimalsTokens(t *testing.T) {
	toks := []string{"0", "-0", "1", "-1", "0.5", "-0.0", "0.1234567", "123456789012345", "-123456789012345",
		"1234567890123456", "12345678901234.5", "1234567890123.45", "1e5", "1E+5", "1e-5", "-2.5e-3", "1.5e308",
		"1e309", "9.99e307", "1e-308", "1e-309", "1.5e-300", "0.000001e-303", "1e999", "1e", "1.", "01", "-01",
		"-", "1.5.3", "1e5e", "4e-7", "0.12345678901234567", "0.1234567890123456789012", "9007199254740993.5",
		"0.9007199254740993", "1.7976931348623157e308", "0.00000000000000000000001234567890123456789e-300",
		"0.30000000000000004", "123.456e-2", "5e0", "7E-0", "100e-2", "0.12345678", "0.123456789",
		"0.1234567890123456", "0.0000000000000000123", "0.00000000000000001", "0.0000000000000000",
		"0.00000000000000000000000000000000001", "-0.30000000000000004", "123456789012345.6", "12345678.12345678",
		"12345678.123456789", "1.5e3", "01.5", "0.9999999999999999999999", "7.25"}
	pad := strings.Repeat(" ", decimalLookahead)
	for _, tok := range toks {
		for _, tail := range []string{",", "]", " ", "", ", 1", "e", "1"} {
			appendDecimalsAgrees(t, []byte(tok+tail), 1, -1)
			appendDecimalsAgrees(t, []byte(tok+tail+pad), 2, 1)
		}
	}
	for _, tok := range []string{"0", "7", "-12", "123456789012345", "0.5", "-0.0", "0.1234567", "0.8444218515250481",
		"0.08444218515250481", "-12.5", "0.12345678901234567"} {
		if _, _, took, _ := AppendDecimals(make([]byte, 0, 8), []byte(tok+pad), 0, true, 1, -1, 0); took != 1 {
			t.Errorf("%q: not taken", tok)
		}
	}
	// Random tokens: digit counts around the limits, and what clients
	// send (float64 or float32 values in shortest or %g form).
	r := rand.New(rand.NewPCG(5, 6))
	digits := func(k int) string {
		b := make([]byte, k)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		return string(b)
	}
	for range 300000 {
		var tok string
		switch r.IntN(3) {
		case 0:
			tok = digits(1 + r.IntN(17))
			if r.IntN(2) == 0 {
				tok += "." + strings.Repeat("0", r.IntN(3)*r.IntN(200)) + digits(1+r.IntN(25))
			}
			if r.IntN(3) == 0 {
				tok += []string{"e", "E", "e-", "e+"}[r.IntN(4)] + digits(1+r.IntN(3))
			}
		case 1:
			v := r.Float64() * math.Pow10(r.IntN(8)-4)
			tok = strconv.FormatFloat(v, 'g', []int{-1, 7, 9, 17}[r.IntN(4)], 64)
		default:
			tok = strconv.FormatFloat(float64(r.Float32()), 'f', -1, 32)
		}
		if r.IntN(2) == 0 {
			tok = "-" + tok
		}
		appendDecimalsAgrees(t, []byte(tok+", 0.5"+pad), 1, -1)
	}
}

// appendDecimalsAgrees checks AppendDecimals on a list text against
// ParseNumber value by value: every value it takes has ParseNumber's bits
// (as float32 and as float64), it stops just after the last one it took,
// and what follows that one is its separator (or the list's end); with
// width > 0 it steps into a sibling list only after width values and only
// with that list's first value.
func appendDecimalsAgrees(t *testing.T, data []byte, limit, width int) {
	t.Helper()
	appendDecimalsAgreesFrom(t, data, limit, width, 0)
}

// appendDecimalsAgreesFrom is appendDecimalsAgrees for a text whose first
// list had n0 values before it (a list cut by a chunk's end).
func appendDecimalsAgreesFrom(t *testing.T, data []byte, limit, width, n0 int) {
	t.Helper()
	for _, wide := range []bool{false, true} {
		size := 4
		if wide {
			size = 8
		}
		dst := make([]byte, 0, limit*size)
		out, end, took, lists := AppendDecimals(dst, data, 0, wide, limit, width, n0)
		if took+lists > limit || len(out) != took*size {
			t.Fatalf("%q: took %d and %d lists (limit %d), wrote %d bytes", data, took, lists, limit, len(out))
		}
		p, inList, stepped := 0, n0, 0
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
			if inList++; data[e] == ']' && inList == width {
				p = SkipSpace(data, e+1)
				if data[p] != ',' {
					t.Fatalf("%q: went on after value %d without a comma", data, i)
				}
				p = SkipSpace(data, p+1)
				if data[p] != '[' {
					t.Fatalf("%q: went on after value %d without a list", data, i)
				}
				p = SkipSpace(data, p+1)
				inList = 0
				stepped++
				continue
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
		if stepped != lists {
			t.Fatalf("%q: %d lists, stepped over %d", data, lists, stepped)
		}
	}
}

// TestAppendDecimals: lists as clients write them (", " and ","), and
// rows of sibling lists ("], [" with any spacing), cut at every kind of
// stop: a limit, another token, a list of another width, the end of the
// data.
func TestAppendDecimals(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 3000 {
		var b []byte
		k, width := 1+r.IntN(12), 1+r.IntN(4)
		for i := range k {
			switch {
			case i > 0 && i%width == 0:
				b = append(b, []string{"], [", "],[", "] ,\n [ ", "], 1", "]]"}[r.IntN(5)]...)
			case i > 0:
				b = append(b, []string{", ", ",", ", ", " , ", ",  "}[r.IntN(5)]...)
			}
			v := r.Float64() * math.Pow10(r.IntN(6)-3)
			if r.IntN(2) == 0 {
				v = -v
			}
			b = strconv.AppendFloat(b, v, 'g', []int{-1, 7, 9, 17, 3}[r.IntN(5)], 64)
		}
		b = append(b, []string{"]", "], [", "]]}", ""}[r.IntN(4)]...)
		w := []int{-1, width, width + 1}[r.IntN(3)]
		appendDecimalsAgrees(t, b, 1+r.IntN(k+4), w)
		appendDecimalsAgrees(t, append(b, strings.Repeat(" ", decimalLookahead)...), 1+r.IntN(k+4), w)
	}
	// The usual image row is taken whole, from list to list.
	row := []byte("0.1234567, 0.8444218515250481, 0.08444218515250481], [0.5, 1" + strings.Repeat(" ", decimalLookahead))
	for _, c := range []struct{ width, took, lists, end int }{{-1, 3, 0, 50}, {3, 5, 1, 60}, {2, 3, 0, 50}} {
		if _, end, took, lists := AppendDecimals(make([]byte, 0, 64), row, 0, false, 8, c.width, 0); took != c.took ||
			lists != c.lists || end != c.end {
			t.Errorf("image row, width %d: took %d, %d lists, end %d; want %d, %d, %d",
				c.width, took, lists, end, c.took, c.lists, c.end)
		}
	}
}

// TestAppendDecimalsSameShape: text written at a fixed precision, which
// AppendDecimals reads in same-shape runs (sameShape), with one value or
// separator changed at each place a run can meet it (another length, an
// exponent, an integer, a second integer digit, a sign, other spacing, a
// list's end before its width), its first list begun before the text,
// cut at any limit, with the right width or another: every value, end and
// list count as ParseNumber reads them.
func TestAppendDecimalsSameShape(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	fixed := []string{"1.5e3", "3", "12.5", "0.12345678", "-0", "1.", "0.5 ", "1.25E-2", "9.999999999", "]"}
	for range 4000 {
		prec, width, n := 1+r.IntN(8), 1+r.IntN(4), 8+r.IntN(40)
		n0 := r.IntN(width) // values of the first list before the text
		sep, step := []string{", ", ","}[r.IntN(2)], []string{"], [", "],["}[r.IntN(2)]
		signs := r.IntN(3) // none, all, mixed
		// Tokens of the run's length that are not its shape: an integer,
		// and an exponent of k digits.
		odd := append(fixed[:len(fixed):len(fixed)], strings.Repeat("7", prec+2), "1e"+strings.Repeat("2", prec),
			"-1E"+strings.Repeat("3", prec), "x."+strings.Repeat("4", prec))
		at, what := r.IntN(n), r.IntN(len(odd)+3)
		var b []byte
		for i := range n {
			alt := ","
			if sep == "," {
				alt = ", "
			}
			switch {
			case i > 0 && i == at && what == len(odd) && (i+n0)%width == 0:
				// A list's end not followed by its sibling.
				b = append(b, []string{"],1", "], 1", "]]", "] ,[", "],  ["}[r.IntN(5)]...)
			case i > 0 && (i+n0)%width == 0:
				b = append(b, step...)
			case i > 0 && i == at && what == len(odd)+2:
				b = append(b, step...) // a list that ends before its width
			case i > 0 && i == at && what == len(odd):
				// Spacing other than the run's.
				b = append(b, []string{" ,", ",  ", alt}[r.IntN(3)]...)
			case i > 0:
				b = append(b, sep...)
			}
			v := r.Float64() * 10
			if signs == 1 || signs == 2 && r.IntN(2) == 0 {
				v = -v
			}
			switch {
			case i == at && what < len(odd):
				b = append(b, odd[what]...)
			case i == at && what == len(odd)+1:
				b = strconv.AppendFloat(b, v, 'f', prec%9+1, 64) // another length
			default:
				b = strconv.AppendFloat(b, v, 'f', prec, 64)
			}
		}
		b = append(b, "]]"...)
		w := []int{width, width, -1, width + 1}[r.IntN(4)]
		appendDecimalsAgreesFrom(t, append(b, strings.Repeat(" ", decimalLookahead)...), 1+r.IntN(n+n/width+2), w, n0)
	}
	// A fixed-precision row is taken by one run, from list to list, up to
	// its last value, whose "]]" the run leaves to appendDecimals.
	var row []byte
	for i := range 30 {
		switch {
		case i > 0 && i%3 == 0:
			row = append(row, "], ["...)
		case i > 0:
			row = append(row, ", "...)
		}
		row = strconv.AppendFloat(row, float64(i)/7-2, 'f', 6, 64)
	}
	row = append(row, "]]"+strings.Repeat(" ", decimalLookahead)...)
	out, _, _, _, n, took, lists := sameShape[float32](make([]byte, 0, 30*4), row, 0, 0, 100, 3, 0, len(row)-decimalLookahead)
	if took != 29 || lists != 9 || n != 2 || len(out) != 29*4 {
		t.Errorf("fixed-precision row: took %d values and %d lists (n %d); want 29, 9 (n 2)", took, lists, n)
	}
}

// FuzzAppendDecimals: AppendDecimals against ParseNumber on any input.
func FuzzAppendDecimals(f *testing.F) {
	f.Add([]byte("0.1234567, 0.8444218515250481,0.08444218515250481], [0.5"), uint8(5+3<<6))
	f.Add([]byte("-12.5e-3, 1, 0.5 ,2"), uint8(3))
	f.Add([]byte("1.250000, 2.500000, -3.750000], [4.125000, 5.000000, 6.000000],[7.5, 8.000000"), uint8(40+3<<6))
	f.Fuzz(func(t *testing.T, data []byte, limit uint8) {
		appendDecimalsAgrees(t, append(data, strings.Repeat(" ", decimalLookahead)...), int(limit&63), int(limit>>6))
	})
}

// TestAppendDecimalsEdges pins which tokens AppendDecimals takes itself
// and their float32 values: digit counts 1…19 (the 17th digit into the
// significand or into the double, longer fractions through parseNumber),
// integer parts, signed zeros, float32 ties, and the tokens it leaves to
// ParseNumber (exponents, overflow to Inf, NaN/Infinity, "-0", "01").
// want is the float32 as TF Serving stores it (rapidjson's double, cast),
// checked independently of ParseNumber: for at most 15 digits rapidjson
// rounds correctly, so strconv's correctly rounded parse is the reference.
func TestAppendDecimalsEdges(t *testing.T) {
	inf32 := float32(math.Inf(1))
	cases := []struct {
		tok   string
		taken bool
		want  float32 // checked where check is set
		check bool
	}{
		{"0.1", true, 0.1, true}, {"0.12", true, 0.12, true}, {"0.123", true, 0.123, true},
		{"0.1234", true, 0.1234, true}, {"0.12345", true, 0.12345, true}, {"0.123456", true, 0.123456, true},
		{"0.1234567", true, 0.1234567, true}, {"0.12345678", true, 0.12345678, true},
		{"0.123456789", true, 0.123456789, true}, {"0.1234567890", true, 0.123456789, true},
		{"0.12345678901", true, 0.12345678901, true}, {"0.123456789012", true, 0.123456789012, true},
		{"0.1234567890123", true, 0.1234567890123, true}, {"0.12345678901234", true, 0.12345678901234, true},
		{"0.123456789012345", true, 0.123456789012345, true}, {"0.1234567890123456", true, 0, false},
		{"0.12345678901234567", true, 0, false}, {"0.123456789012345678", true, 0, false},
		{"0.1234567890123456789", true, 0, false},
		// The 17th digit: the 16 before it at most 2^53-1, and above.
		{"0.90071992547409915", true, 0, false}, {"0.90071992547409925", true, 0, false},
		{"0.99999999999999999", true, 1, true}, {"9.9999999999999999", true, 10, true},
		{"12.345678901234567", true, 0, false}, {"123456789012345.67", true, 0, false},
		{"1", true, 1, true}, {"255", true, 255, true}, {"-7", true, -7, true}, {"123456789012345", true, 123456789012345, true},
		{"1234567890123456", false, 0, false}, {"-12.5", true, -12.5, true}, {"0.0000001", true, 1e-7, true},
		{"0.0", true, 0, true}, {"-0.0", true, float32(math.Copysign(0, -1)), true},
		// float32 ties: 2^24+1 and 1+2^-24 round to even.
		{"16777217", true, 16777216, true}, {"16777219", true, 16777220, true},
		{"1.000000059604644775390625", true, 1, true}, {"1.0000000596046448", true, 1, true},
		{"1.0000000596046451", true, 1.0000001, true},
		// Left to ParseNumber.
		{"-0", false, 0, true}, {"01", false, 0, false}, {"1e5", false, 1e5, true}, {"1.5E-3", false, 1.5e-3, true},
		{"1e39", false, inf32, true}, {"-1e39", false, -inf32, true}, {"3.5e38", false, inf32, true},
		{"NaN", false, 0, false}, {"Infinity", false, inf32, true}, {"-Infinity", false, -inf32, true},
		{"1.", false, 0, false}, {"-", false, 0, false},
	}
	pad := strings.Repeat(" ", decimalLookahead)
	for _, c := range cases {
		data := []byte(c.tok + ", 1" + pad)
		out, _, took, _ := AppendDecimals(make([]byte, 0, 8), data, 0, false, 1, -1, 0)
		if took != 1 && c.taken || took != 0 && !c.taken {
			t.Errorf("%q: took %d, want taken %v", c.tok, took, c.taken)
		}
		appendDecimalsAgrees(t, data, 2, -1)
		n, _, ok := ParseNumber(data, 0)
		got := float32(n.Float64())
		if took == 1 {
			got = math.Float32frombits(binary.LittleEndian.Uint32(out))
		}
		if c.check && (!ok || math.Float32bits(got) != math.Float32bits(c.want)) {
			t.Errorf("%q: %v (%#x), want %v (%#x)", c.tok, got, math.Float32bits(got), c.want, math.Float32bits(c.want))
		}
		if c.tok == "NaN" && (!ok || !math.IsNaN(float64(got))) {
			t.Errorf("NaN: %v", got)
		}
	}
}
