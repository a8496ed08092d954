package jsontext

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// readErr pulls every token of text and returns the error that ended it.
func readErr(text string, lim Limits) error {
	var p Pull
	p.Reset([]byte(text), lim)
	for {
		if _, ok := p.Next(); !ok {
			return p.Err()
		}
	}
}

// first returns the first token of text, which must read without error,
// and the offset after it.
func first(t *testing.T, text string) (Token, int) {
	t.Helper()
	var p Pull
	p.Reset([]byte(text), Limits{})
	tok, ok := p.Next()
	if !ok {
		t.Fatalf("%q: %v", text, p.Err())
	}
	return tok, p.Pos()
}

// TestSyntaxErrors pins rapidjson 1.1.0's iterative parser: message and
// offset of every error class, derived state by state from reader.h.
func TestSyntaxErrors(t *testing.T) {
	tests := []struct {
		in     string
		msg    string
		offset int
	}{
		{"", "The document is empty.", 0},
		{"   \n\t", "The document is empty.", 5},
		{"\x00{}", "The document is empty.", 0},
		{"\xEF\xBB\xBF", "The document is empty.", 3}, // BOM skipped, offsets absolute
		{"\xEF\xBF x", "Invalid value.", 3},
		{"\xBB\xEF", "Invalid value.", 1},
		{"]", "The document is empty.", 0}, // HandleError(Start) for a bad first token
		{",", "The document is empty.", 0},
		{"x", "Invalid value.", 0},
		{"{", "Missing a name for object member.", 1},
		{"{1:2}", "Missing a name for object member.", 1},
		{`{"a":1,}`, "Missing a name for object member.", 7},
		{`{"a":1,`, "Missing a name for object member.", 7},
		{`{"a" 1}`, "Missing a colon after a name of object member.", 5},
		{`{"a"`, "Missing a colon after a name of object member.", 4},
		{`{"a":}`, "Invalid value.", 5},
		{`{"a":`, "Invalid value.", 5},
		{`{"a":1 "b":2}`, "Missing a comma or '}' after an object member.", 7},
		{`{"a":1]`, "Missing a comma or '}' after an object member.", 6},
		{"[", "Invalid value.", 1},
		{"[1,]", "Invalid value.", 3},
		{"[,", "Invalid value.", 1},
		{"[1 2]", "Missing a comma or ']' after an array element.", 3},
		{"[1}", "Missing a comma or ']' after an array element.", 2},
		{`{"instances": [1, 2 3]}`, "Missing a comma or ']' after an array element.", 20},
		{"[1", "Missing a comma or ']' after an array element.", 2},
		{"[1\x00]", "Missing a comma or ']' after an array element.", 2},
		{"[tru]", "Invalid value.", 4},
		{"[nul", "Invalid value.", 4},
		{"[fals3]", "Invalid value.", 5},
		{"[-]", "Invalid value.", 2},
		{"[+1]", "Invalid value.", 1},
		{"[.5]", "Invalid value.", 1},
		{"[nan]", "Invalid value.", 2}, // ParseNull consumed the n
		{"[inf]", "Invalid value.", 1},
		{"[Nan]", "Invalid value.", 3},
		{"[Infinit]", "Invalid value.", 8},
		{"[Infinityy]", "Missing a comma or ']' after an array element.", 9},
		{"[1.]", "Miss fraction part in number.", 3},
		{"[1.e5]", "Miss fraction part in number.", 3},
		{"[1e]", "Miss exponent in number.", 3},
		{"[1e+]", "Miss exponent in number.", 4},
		{"[01]", "Missing a comma or ']' after an array element.", 2},
		{"[1e309]", "Number too big to be stored in double.", 1},
		{"[0.5e1000]", "Number too big to be stored in double.", 1},
		{"[" + strings.Repeat("9", 310) + "]", "Number too big to be stored in double.", 1},
		{`["abc`, "Missing a closing quotation mark in string.", 5},
		{"[\"a\x00b\"]", "Missing a closing quotation mark in string.", 3},
		{"[\"a\tb\"]", "Invalid escape character in string.", 3},
		{"[\"a\\x\"]", "Invalid escape character in string.", 3},
		{"[\"a\\", "Invalid escape character in string.", 3},
		{`["\u12G4"]`, "Incorrect hex digit after \\u escape in string.", 2},
		{`["\ud800"]`, "The surrogate pair in string is invalid.", 2},
		{`["\ud800\u0041"]`, "The surrogate pair in string is invalid.", 2},
		{`["\ud800\uZZZZ"]`, "Incorrect hex digit after \\u escape in string.", 2},
		{`{"a\q":1}`, "Invalid escape character in string.", 3},
	}
	for _, tt := range tests {
		err := readErr(tt.in, Limits{})
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: %v, want a SyntaxError", tt.in, err)
			continue
		}
		if se.Msg != tt.msg || se.Offset != tt.offset {
			t.Errorf("%q: %q at %d, want %q at %d", tt.in, se.Msg, se.Offset, tt.msg, tt.offset)
		}
	}
}

func TestSyntaxErrorText(t *testing.T) {
	err := readErr("[1 2]", Limits{})
	if got, want := err.Error(), "Missing a comma or ']' after an array element. at offset: 3"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestLimits(t *testing.T) {
	deep := strings.Repeat("[", 5) + strings.Repeat("]", 5)
	if err := readErr(deep, Limits{MaxDepth: 5}); err != nil {
		t.Errorf("depth 5 at limit 5: %v", err)
	}
	var se *SyntaxError
	if err := readErr(deep, Limits{MaxDepth: 4}); !errors.As(err, &se) || se.Msg != msgTooDeep || se.Offset != 4 {
		t.Errorf("depth 5 at limit 4: %v", err)
	}
	// 2*MaxElements + 65536 nodes.
	many := "[" + strings.Repeat("0,", 1<<16+3) + "0]"
	if err := readErr(many, ForElements(0, 1)); !errors.As(err, &se) || se.Msg != msgTooManyVals {
		t.Errorf("too many values: %v", err)
	}
	if err := readErr(many, ForElements(0, 1<<16)); err != nil {
		t.Errorf("values within limit: %v", err)
	}
}

func TestNumberClassification(t *testing.T) {
	const (
		I  = flagInt
		U  = flagUint
		I6 = flagInt64
		U6 = flagUint64
		D  = flagDouble
	)
	tests := []struct {
		in    string
		flags uint8
		i64   int64
		u64   uint64
		f     float64
	}{
		{"0", I | U | I6 | U6, 0, 0, 0},
		{"-0", I | U | I6 | U6, 0, 0, 0},
		{"1", I | U | I6 | U6, 1, 1, 1},
		{"2147483647", I | U | I6 | U6, 2147483647, 2147483647, 2147483647},
		{"2147483648", U | I6 | U6, 2147483648, 2147483648, 2147483648},
		{"4294967295", U | I6 | U6, 4294967295, 4294967295, 4294967295},
		{"4294967296", I6 | U6, 4294967296, 4294967296, 4294967296},
		{"-1", I | I6, -1, 0, -1},
		{"-2147483648", I | I6, -2147483648, 0, -2147483648},
		{"-2147483649", I6, -2147483649, 0, -2147483649},
		{"9223372036854775807", I6 | U6, math.MaxInt64, math.MaxInt64, 9223372036854775807},
		{"9223372036854775808", U6, 0, 1 << 63, 9223372036854775808},
		{"18446744073709551615", U6, 0, math.MaxUint64, 18446744073709551615},
		{"-9223372036854775808", I6, math.MinInt64, 0, -9223372036854775808},
		{"18446744073709551616", D, 0, 0, 18446744073709551616},
		{"-9223372036854775809", D, 0, 0, -9223372036854775809},
		{"1.0", D, 0, 0, 1},
		{"1e2", D, 0, 0, 100},
		{"1E2", D, 0, 0, 100},
		{"1e+2", D, 0, 0, 100},
		{"-2.5e-3", D, 0, 0, -0.0025},
		{"-0.0", D, 0, 0, math.Copysign(0, -1)},
		{"2e308", D, 0, 0, math.Inf(1)},
		{"1.8e308", D, 0, 0, math.Inf(1)},
		{"1e-400", D, 0, 0, 0},
		{"-1e-400", D, 0, 0, math.Copysign(0, -1)},
		{"1e-99999999999", D, 0, 0, 0},
		{"0.000000000000000000000000000001e330", D, 0, 0, 1e300},
		{"Infinity", D, 0, 0, math.Inf(1)},
		{"-Infinity", D, 0, 0, math.Inf(-1)},
		{"Inf", D, 0, 0, math.Inf(1)},
		{"-Inf", D, 0, 0, math.Inf(-1)},
		// rapidjson's sequential consumes: a failed NaN retries Inf.
		{"NInf", D, 0, 0, math.Inf(1)},
		// …and a fraction after NaN/Inf restarts from a zero significand.
		{"NaN.5", D, 0, 0, 0.5},
		{"-Inf.25", D, 0, 0, -0.25},
		{"Infe3", D, 0, 0, 0},
		{"1234.5678901234567", D, 0, 0, math.Float64frombits(0x40934a4584fd0fe0)},
	}
	for _, tt := range tests {
		v, _ := first(t, tt.in)
		if v.Kind != NumberValue || v.Num.flags&^flagNeg != tt.flags {
			t.Errorf("%s: kind %v flags %05b, want a number %05b", tt.in, v.Kind, v.Num.flags&^flagNeg, tt.flags)
			continue
		}
		if v.Num.IsInt64() && v.Num.Int64() != tt.i64 {
			t.Errorf("%s: Int64 %d, want %d", tt.in, v.Num.Int64(), tt.i64)
		}
		if v.Num.IsUint64() && v.Num.Uint64() != tt.u64 {
			t.Errorf("%s: Uint64 %d, want %d", tt.in, v.Num.Uint64(), tt.u64)
		}
		if got := v.Num.Float64(); math.Float64bits(got) != math.Float64bits(tt.f) {
			t.Errorf("%s: Float64 %v (%#x), want %v (%#x)", tt.in, got, math.Float64bits(got), tt.f, math.Float64bits(tt.f))
		}
	}
	for _, s := range []string{"NaN", "-NaN"} {
		v, _ := first(t, s)
		if !v.Num.IsDouble() || math.Float64bits(v.Num.Float64()) != 0x7FF8000000000000 {
			t.Errorf("%s: %#x, want C's quiet NaN", s, math.Float64bits(v.Num.Float64()))
		}
	}
}

func TestStrings(t *testing.T) {
	tests := []struct {
		in, want string
		aliased  bool
	}{
		{`"abc"`, "abc", true},
		{`""`, "", true},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t", false},
		{`"\u00e9"`, "é", false},
		{`"\u20AC"`, "€", false},
		{`"\ud83d\ude00"`, "😀", false},
		{`"\u0000x"`, "\x00x", false},
		{`"\udc00"`, "\xed\xb0\x80", false},        // lone low surrogate: 3 raw bytes
		{"\"\xff\xfe raw\"", "\xff\xfe raw", true}, // no UTF-8 validation
		{"\"caf\xc3\xa9 \\n\"", "café \n", false},
	}
	for _, tt := range tests {
		v, end := first(t, tt.in)
		if v.Kind != StringValue || string(v.Str) != tt.want {
			t.Errorf("%s: %v %q, want %q", tt.in, v.Kind, v.Str, tt.want)
		}
		if v.InChunk != tt.aliased {
			t.Errorf("%s: aliased %v, want %v", tt.in, v.InChunk, tt.aliased)
		}
		if tt.in[v.Off:end] != tt.in {
			t.Errorf("%s: raw %q", tt.in, tt.in[v.Off:end])
		}
	}
}
