package jsontext

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestDump(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"instances": []}`, "{\n    \"instances\": []\n}"},
		{`[1, 2]`, "[1, 2]"},
		{`[ [1,2] , [3] ]`, "[[1, 2], [3]]"},
		{`"a"`, `"a"`},
		{`"a\"b\u0001\n/"`, `"a\"b\u0001\n/"`},
		{`null`, "null"},
		{`true`, "true"},
		{`false`, "false"},
		{`1.0`, "1.0"},
		{`1e2`, "100.0"},
		{`-0`, "0"},
		{`-0.0`, "-0.0"},
		{`-7`, "-7"},
		{`18446744073709551615`, "18446744073709551615"},
		{`18446744073709551616`, "18446744073709553000.0"},
		{`0.1`, "0.1"},
		{`1e21`, "1e21"},
		{`1e22`, "1e22"},
		{`1.5e300`, "1.5e300"},
		{`1e-7`, "1e-7"},
		{`1.5e-6`, "0.0000015"},
		{`0.000001`, "0.000001"},
		{`123.456`, "123.456"},
		{`NaN`, ""},
		{`-Infinity`, ""},
		{`[1, NaN, 2]`, "[1, "},
		{`{"a": 1, "b": Infinity, "c": 2}`, "{\n    \"a\": 1,\n    \"b\": "},
		{`{}`, "{}"},
		{`{"a": {}}`, "{\n    \"a\": {}\n}"},
		{`{"b64": "aGVsbG8="}`, "{\n    \"b64\": \"aGVsbG8=\"\n}"},
		{`{"a": [1, {"b": 2}]}`, "{\n    \"a\": [1, {\n            \"b\": 2\n        }]\n}"},
		{`{"a":1, "a":2}`, "{\n    \"a\": 1,\n    \"a\": 2\n}"},
	}
	for _, tt := range tests {
		if got := Dump(tt.in); got != tt.want {
			t.Errorf("Dump(%s)\n got %q\nwant %q", tt.in, got, tt.want)
		}
		if got := string(appendDump([]byte("x"), tt.in, DumpLimit)); got != "x"+tt.want {
			t.Errorf("appendDump(%s) = %q", tt.in, got)
		}
	}
}

// TestDumpLimit: TF's limited writer checks, before each token, that the
// output is shorter than 256 bytes, then writes the token whole with its
// prefix; nothing is written once 256 bytes are reached (no closing
// brackets, no marker). Each case crosses the mark at a different token.
func TestDumpLimit(t *testing.T) {
	a, x := strings.Repeat("a", 300), strings.Repeat("x", 300)
	instance := "{\n            \"x\": [1, 2, 3],\n            \"y\": \"abc\"\n        }"
	tests := []struct{ name, in, want string }{
		{"long string whole", `"` + a + `"`, `"` + a + `"`},
		{"long string then nothing", `["` + a + `", 1]`, `["` + a + `"`},
		{"numbers: the one crossing 256 is whole", "[" + strings.Repeat("123456789, ", 29) + "123456789]",
			"[" + strings.Repeat("123456789, ", 23) + "123456789"},
		{"256 bytes before the closing bracket", "[" + strings.Repeat("1, ", 84) + "123]", "[" + strings.Repeat("1, ", 84) + "123"},
		{"closing bracket at 255 bytes", "[" + strings.Repeat("1, ", 84) + "12]", "[" + strings.Repeat("1, ", 84) + "12]"},
		{"long key without its value", `{"` + x + `": 1}`, "{\n    \"" + x + `"`},
		{"next key refused", `{"a": "` + x[:260] + `", "b": 1}`, "{\n    \"a\": \"" + x[:260] + `"`},
		{"closing brace refused", `{"a": "` + x[:250] + `"}`, "{\n    \"a\": \"" + x[:250] + `"`},
		{"closing brace at 253 bytes", `{"a": "` + x[:240] + `"}`, "{\n    \"a\": \"" + x[:240] + "\"\n}"},
		{"array opened last", `["` + a[:251] + `", [1, 2]]`, `["` + a[:251] + `", [`},
		{"object opened last", `["` + a[:251] + `", {"k": 1}]`, `["` + a[:251] + `", {`},
		{"literal last", `["` + a[:250] + `", true, null]`, `["` + a[:250] + `", true`},
		{"NaN after the mark adds nothing", `["` + a + `", NaN]`, `["` + a + `"`},
		{"nested objects in an array, cut after a key", `{"instances": [` + strings.Repeat(`{"x": [1, 2, 3], "y": "abc"}, `, 7) + `{"x": [1, 2, 3], "y": "abc"}]}`,
			"{\n    \"instances\": [" + strings.Repeat(instance+", ", 3) + "{\n            \"x\": [1, 2, 3],\n            \"y\""},
	}
	for _, tt := range tests {
		if got := Dump(tt.in); got != tt.want {
			t.Errorf("%s: Dump\n got %d %q\nwant %d %q", tt.name, len(got), got, len(tt.want), tt.want)
		}
		// The limit counts the dump's own bytes, not what dst held.
		if got := string(appendDump([]byte(x), tt.in, DumpLimit)); got != x+tt.want {
			t.Errorf("%s: appendDump after 300 bytes differs", tt.name)
		}
	}
}

// TestGrisuRoundTrips: rapidjson's Grisu2 output always reads back as the
// same double and is never longer than 17 digits; it is the shortest form
// in all but rare cases.
func TestGrisuRoundTrips(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	differ := 0
	const n = 200000
	for i := 0; i < n; i++ {
		var f float64
		switch i % 3 {
		case 0:
			f = math.Float64frombits(r.Uint64() &^ (1 << 63))
			if math.IsNaN(f) || math.IsInf(f, 0) || f == 0 {
				continue
			}
		case 1:
			f = r.Float64()
		default:
			f = float64(float32(r.Float64() * 1000))
		}
		s := string(appendGrisu(nil, f))
		back, err := strconv.ParseFloat(s, 64)
		if err != nil || back != f {
			t.Fatalf("%v (%#x) -> %q -> %v %v", f, math.Float64bits(f), s, back, err)
		}
		short := strconv.FormatFloat(f, 'e', -1, 64)
		mant := strings.TrimLeft(strings.Split(strings.ReplaceAll(s, ".", ""), "e")[0], "0")
		mant = strings.TrimRight(mant, "0")
		shortMant := strings.ReplaceAll(strings.Split(short, "e")[0], ".", "")
		if len(mant) > len(shortMant) {
			differ++
		}
	}
	if differ > n/100 {
		t.Errorf("Grisu2 longer than shortest in %d of %d cases", differ, n)
	}
}

func TestGrisuExamples(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{1, "1.0"},
		{100, "100.0"},
		{0.3, "0.3"},
		{2.0 / 3, "0.6666666666666666"},
		{5e-324, "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e308"},
		{1e21, "1e21"},
		{123456789012345680000, "123456789012345680000.0"},
		{-2.5, "-2.5"},
		{math.Copysign(0, -1), "-0.0"},
	}
	for _, tt := range tests {
		if got := string(appendGrisu(nil, tt.f)); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.f, got, tt.want)
		}
	}
}

// Dump renders the first value of text as a dump.
func Dump(text string) string { return string(appendDump(nil, text, DumpLimit)) }

// appendDump appends the dump of the first value of text, limited to limit
// bytes, fed token by token from Pull as a one-pass reader feeds it.
func appendDump(dst []byte, text string, limit int) []byte {
	var p Pull
	p.Reset([]byte(text), Limits{})
	var s DumpStream
	s.Reset(dst)
	s.limit = len(dst) + limit
	for {
		if tok, ok := p.Next(); !ok || !s.Feed(tok) {
			return s.Bytes()
		}
	}
}
