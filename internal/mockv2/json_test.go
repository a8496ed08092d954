package mockv2

import (
	"math"
	"testing"
)

func TestScanDocument(t *testing.T) {
	cases := []struct {
		in      string
		d       dialect
		ok      bool
		kind    scanErrKind
		off     int
		rapid   string
		python  string
		trimmed string
	}{
		{in: ` {"a":[1,-2.5e3,true,null,"x\u00e9"]} `, d: dialectRapid, ok: true, trimmed: `{"a":[1,-2.5e3,true,null,"x\u00e9"]}`},
		{in: `[NaN,Inf,-Infinity,-NaN]`, d: dialectRapid, ok: true},
		{in: `[NaN,Infinity,-Infinity]`, d: dialectPython, ok: true},
		{in: `[Inf]`, d: dialectPython, kind: scanValueInvalid, off: 1, python: "Expecting value"},
		{in: `[-NaN]`, d: dialectPython, kind: scanValueInvalid, off: 1},
		{in: `[NaN]`, d: dialectStrict, kind: scanValueInvalid, off: 1},
		{in: ``, d: dialectRapid, kind: scanEmpty, off: 0, rapid: "The document is empty."},
		{in: `{} x`, d: dialectRapid, kind: scanRootNotSingular, off: 3,
			rapid: "The document root must not be followed by other values.", python: "Extra data"},
		{in: `{"a" 1}`, d: dialectRapid, kind: scanMissColon, off: 5, rapid: "Missing a colon after a name of object member."},
		{in: `{"a":1 "b":2}`, d: dialectPython, kind: scanMissCommaOrBrace, off: 7, python: "Expecting ',' delimiter"},
		{in: `{1:2}`, d: dialectPython, kind: scanMissName, off: 1, python: "Expecting property name enclosed in double quotes"},
		{in: `{"a":1,}`, d: dialectRapid, kind: scanMissName, off: 7, rapid: "Missing a name for object member."},
		{in: `[1 2]`, d: dialectRapid, kind: scanMissCommaOrBracket, off: 3, rapid: "Missing a comma or ']' after an array element."},
		{in: `[1.]`, d: dialectRapid, kind: scanMissFraction, off: 3, rapid: "Miss fraction part in number."},
		{in: `[1e]`, d: dialectRapid, kind: scanMissExponent, off: 3, rapid: "Miss exponent in number."},
		{in: `[1e400]`, d: dialectRapid, kind: scanNumberTooBig, off: 1, rapid: "Number too big to be stored in double."},
		{in: `[1e400]`, d: dialectPython, ok: true},
		{in: `["a\qb"]`, d: dialectRapid, kind: scanBadEscape, off: 3, rapid: "Invalid escape character in string."},
		{in: `["\u12G4"]`, d: dialectRapid, kind: scanBadUnicodeHex, off: 2, rapid: "Incorrect hex digit after \\u escape in string."},
		{in: `["\ud800x"]`, d: dialectRapid, kind: scanBadSurrogate, off: 2, rapid: "The surrogate pair in string is invalid."},
		{in: `["\ud800x"]`, d: dialectPython, ok: true},
		{in: "[\"a\x01\"]", d: dialectRapid, kind: scanControlChar, off: 3, rapid: "Invalid encoding in string."},
		{in: `["abc`, d: dialectPython, kind: scanMissQuote, off: 1, python: "Unterminated string starting at"},
		{in: `["abc`, d: dialectRapid, kind: scanMissQuote, off: 5, rapid: "Missing a closing quotation mark in string."},
		{in: `[01]`, d: dialectRapid, kind: scanMissCommaOrBracket, off: 2},
		{in: `[tru]`, d: dialectRapid, kind: scanValueInvalid, off: 4, rapid: "Invalid value."},
		{in: `[tru]`, d: dialectPython, kind: scanValueInvalid, off: 1, python: "Expecting value"},
	}
	for _, c := range cases {
		v, err := scanDocument([]byte(c.in), c.d)
		if c.ok {
			if err != nil {
				t.Errorf("%q: %v", c.in, err)
			} else if c.trimmed != "" && string(v) != c.trimmed {
				t.Errorf("%q: root %q", c.in, v)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q (dialect %d): no error", c.in, c.d)
			continue
		}
		if err.Kind != c.kind || err.Off != c.off {
			t.Errorf("%q: error kind %d at %d, want %d at %d", c.in, err.Kind, err.Off, c.kind, c.off)
		}
		if c.rapid != "" && err.rapidMessage() != c.rapid {
			t.Errorf("%q: rapid message %q", c.in, err.rapidMessage())
		}
		if c.python != "" && err.pythonMessage() != c.python {
			t.Errorf("%q: python message %q", c.in, err.pythonMessage())
		}
	}
}

func TestScanDepthIsBounded(t *testing.T) {
	deep := make([]byte, 0, 2*maxScanDepth+4)
	for range maxScanDepth + 1 {
		deep = append(deep, '[')
	}
	for range maxScanDepth + 1 {
		deep = append(deep, ']')
	}
	if _, err := scanDocument(deep, dialectRapid); err == nil || err.Kind != scanTooDeep {
		t.Errorf("nesting %d deep: %v", maxScanDepth+1, err)
	}
}

func TestViews(t *testing.T) {
	doc, err := scanDocument([]byte(`{"a":1, "s":"x\"y\\u\u00e9\ud83d\ude00", "a":2, "list":[ [1,2] , {"k":[]}, "]" ]}`), dialectRapid)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := doc.get("a", false); string(v) != "1" {
		t.Errorf("first a = %s", v)
	}
	if v, _ := doc.get("a", true); string(v) != "2" {
		t.Errorf("last a = %s", v)
	}
	if s, _ := doc.get("s", false); string(s.decodeString()) != "x\"y\\u\u00e9\U0001F600" {
		t.Errorf("s = %q", s.decodeString())
	}
	list, _ := doc.get("list", false)
	var elems []string
	list.elems(func(_ int, e jval) bool { elems = append(elems, string(e)); return true })
	if len(elems) != 3 || elems[0] != "[1,2]" || elems[1] != `{"k":[]}` || elems[2] != `"]"` {
		t.Errorf("elems %q", elems)
	}
	if _, ok := doc.get("missing", false); ok {
		t.Error("found a missing key")
	}
}

func TestNumbers(t *testing.T) {
	cases := []struct {
		in              string
		isInt, i64, u64 bool
		f               float64
	}{
		{"1", true, true, true, 1},
		{"-1", true, true, false, -1},
		{"-0", true, true, false, 0},
		{"18446744073709551615", true, false, true, 18446744073709551615},
		{"9223372036854775808", true, false, true, 9223372036854775808},
		{"-9223372036854775809", true, false, false, -9223372036854775809},
		{"1.0", false, false, false, 1},
		{"1e2", false, false, false, 100},
		{"Infinity", false, false, false, math.Inf(1)},
	}
	for _, c := range cases {
		n := jval(c.in).number()
		if n.isInt != c.isInt || n.isInt64 != c.i64 || n.isUint64 != c.u64 || n.f != c.f {
			t.Errorf("%s: %+v", c.in, n)
		}
	}
	if n := jval("NaN").number(); !math.IsNaN(n.f) {
		t.Errorf("NaN: %+v", n)
	}
}

func TestFloatFormats(t *testing.T) {
	cases := []struct {
		f      float64
		rapid  string
		python string
	}{
		{0, "0.0", "0.0"},
		{math.Copysign(0, -1), "-0.0", "-0.0"},
		{2.5, "2.5", "2.5"},
		{6, "6.0", "6.0"},
		{-123.25, "-123.25", "-123.25"},
		{float64(float32(6.8)), "6.800000190734863", "6.800000190734863"},
		{1e20, "100000000000000000000.0", "1e+20"},
		{1e21, "1e21", "1e+21"},
		{1e16, "10000000000000000.0", "1e+16"},
		{1e15, "1000000000000000.0", "1000000000000000.0"},
		{1.234e30, "1.234e30", "1.234e+30"},
		{0.0001, "0.0001", "0.0001"},
		{0.00001, "0.00001", "1e-05"},
		{1e-6, "0.000001", "1e-06"},
		{1e-7, "1e-7", "1e-07"},
		{1.5e-10, "1.5e-10", "1.5e-10"},
		{5e-324, "5e-324", "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e308", "1.7976931348623157e+308"},
		{math.NaN(), "NaN", "null"},
		{math.Inf(1), "Infinity", "null"},
		{math.Inf(-1), "-Infinity", "null"},
	}
	for _, c := range cases {
		if got := string(appendRapidDouble(nil, c.f)); got != c.rapid {
			t.Errorf("rapid(%v) = %s, want %s", c.f, got, c.rapid)
		}
		if got := string(appendPyFloat(nil, c.f)); got != c.python {
			t.Errorf("python(%v) = %s, want %s", c.f, got, c.python)
		}
	}
}

func TestStringEscapes(t *testing.T) {
	in := []byte("a\"\\/\b\f\n\r\t\x01\x1f\x7f\xff")
	if got := string(appendJSONString(nil, in, true)); got != "\"a\\\"\\\\/\\b\\f\\n\\r\\t\\u0001\\u001F\x7f\xff\"" {
		t.Errorf("rapid: %q", got)
	}
	if got := string(appendJSONString(nil, in, false)); got != "\"a\\\"\\\\/\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\xff\"" {
		t.Errorf("python: %q", got)
	}
	if got := pyBytesRepr([]byte("a'\\\n\x00\xff")); got != `b'a\'\\\n\x00\xff'` {
		t.Errorf("pyBytesRepr: %s", got)
	}
	if got := pyTuple([]int64{3}); got != "(3,)" {
		t.Errorf("pyTuple: %s", got)
	}
	if got := pyShapeRepr([]int64{2, 3}); got != "(2, 3)" {
		t.Errorf("pyShapeRepr: %s", got)
	}
}

func TestParsers(t *testing.T) {
	stoi := []struct {
		in             string
		n              int64
		valid, inRange bool
	}{
		{"12", 12, true, true}, {" +7x", 7, true, true}, {"-3", -3, true, true}, {"abc", 0, false, false},
		{"", 0, false, false}, {"-", 0, false, false}, {"2147483648", 2147483648, true, false},
		{"99999999999999999999999", 0, true, false},
	}
	for _, c := range stoi {
		n, valid, inRange := parseStoi(c.in)
		if valid != c.valid || inRange != c.inRange || (c.inRange && n != c.n) {
			t.Errorf("stoi(%q) = %d %v %v", c.in, n, valid, inRange)
		}
	}
	pyints := []struct {
		in string
		n  int64
		ok bool
	}{{" 12 ", 12, true}, {"1_000", 1000, true}, {"_1", 0, false}, {"1__0", 0, false}, {"1.0", 0, false}, {"-5", -5, true}}
	for _, c := range pyints {
		if n, ok := pyInt(c.in); ok != c.ok || n != c.n {
			t.Errorf("pyInt(%q) = %d %v", c.in, n, ok)
		}
	}
	slices := []struct {
		n      int
		lo, hi int64
		wa, wz int
	}{{10, 0, 4, 0, 4}, {10, 8, 20, 8, 10}, {10, 0, -3, 0, 7}, {10, -100, 3, 0, 3}, {10, 6, 2, 6, 6}}
	for _, c := range slices {
		if a, z := pySlice(c.n, c.lo, c.hi); a != c.wa || z != c.wz {
			t.Errorf("pySlice(%d,%d,%d) = %d,%d", c.n, c.lo, c.hi, a, z)
		}
	}
	enc := []struct{ accept, want string }{
		{"gzip", "gzip"}, {"gzip, deflate", "gzip"}, {"deflate;q=0.9, gzip;q=0.8", "deflate"},
		{"br", "identity"}, {"gzip;q=abc", "identity"}, {"identity;q=0.5, gzip;q=0.4", "identity"}, {"", "identity"},
	}
	for _, c := range enc {
		if got := tritonResponseEncoding(c.accept); got != c.want {
			t.Errorf("Accept-Encoding %q → %s, want %s", c.accept, got, c.want)
		}
	}
}
