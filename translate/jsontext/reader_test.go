package jsontext

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func mustParse(t *testing.T, s string) *Document {
	t.Helper()
	d, err := Parse([]byte(s), Limits{})
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	t.Cleanup(d.Release)
	return d
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
		_, err := Parse([]byte(tt.in), Limits{})
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, want a SyntaxError", tt.in, err)
			continue
		}
		if se.Msg != tt.msg || se.Offset != tt.offset {
			t.Errorf("Parse(%q) = %q at %d, want %q at %d", tt.in, se.Msg, se.Offset, tt.msg, tt.offset)
		}
	}
}

func TestSyntaxErrorText(t *testing.T) {
	_, err := Parse([]byte("[1 2]"), Limits{})
	if got, want := err.Error(), "Missing a comma or ']' after an array element. at offset: 3"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestStopWhenDone: the first complete value is the document.
func TestStopWhenDone(t *testing.T) {
	for _, s := range []string{"\xEF\xBB\xBF{\"a\":[1]}", `{"a":[1]} junk`, `{"a":[1]}}`, "{\"a\":[1]}\x00garbage", `{"a":[1]}{"b":2}`} {
		d := mustParse(t, s)
		if d.Root().Kind() != Object || d.Root().Len() != 1 {
			t.Errorf("%q: root %v len %d", s, d.Root().Kind(), d.Root().Len())
		}
		if got := string(d.Root().Raw()); got != `{"a":[1]}` {
			t.Errorf("%q: raw %q", s, got)
		}
	}
}

func TestLimits(t *testing.T) {
	deep := strings.Repeat("[", 5) + strings.Repeat("]", 5)
	if _, err := Parse([]byte(deep), Limits{MaxDepth: 5}); err != nil {
		t.Errorf("depth 5 at limit 5: %v", err)
	}
	var se *SyntaxError
	if _, err := Parse([]byte(deep), Limits{MaxDepth: 4}); !errors.As(err, &se) || se.Msg != msgTooDeep || se.Offset != 4 {
		t.Errorf("depth 5 at limit 4: %v", err)
	}
	// 2*MaxElements + 65536 nodes.
	many := "[" + strings.Repeat("0,", 1<<16+3) + "0]"
	if _, err := Parse([]byte(many), ForElements(0, 1)); !errors.As(err, &se) || se.Msg != msgTooManyVals {
		t.Errorf("too many values: %v", err)
	}
	if _, err := Parse([]byte(many), ForElements(0, 1<<16)); err != nil {
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
		d := mustParse(t, tt.in)
		v := d.Root()
		n := &d.nodes[0]
		if v.Kind() != Number || n.flags&^flagNeg != tt.flags {
			t.Errorf("%s: kind %v flags %05b, want Number %05b", tt.in, v.Kind(), n.flags&^flagNeg, tt.flags)
			continue
		}
		if v.Num().IsInt64() && v.Num().Int64() != tt.i64 {
			t.Errorf("%s: Int64 %d, want %d", tt.in, v.Num().Int64(), tt.i64)
		}
		if v.Num().IsUint64() && v.Num().Uint64() != tt.u64 {
			t.Errorf("%s: Uint64 %d, want %d", tt.in, v.Num().Uint64(), tt.u64)
		}
		if got := v.Num().Float64(); math.Float64bits(got) != math.Float64bits(tt.f) {
			t.Errorf("%s: Float64 %v (%#x), want %v (%#x)", tt.in, got, math.Float64bits(got), tt.f, math.Float64bits(tt.f))
		}
	}
	for _, s := range []string{"NaN", "-NaN"} {
		v := mustParse(t, s).Root()
		if !v.Num().IsDouble() || math.Float64bits(v.Num().Float64()) != 0x7FF8000000000000 {
			t.Errorf("%s: %#x, want C's quiet NaN", s, math.Float64bits(v.Num().Float64()))
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
		d := mustParse(t, tt.in)
		v := d.Root()
		if v.Kind() != String || string(v.Str()) != tt.want {
			t.Errorf("%s: %v %q, want %q", tt.in, v.Kind(), v.Str(), tt.want)
		}
		if got := d.nodes[0].flags&flagEscaped == 0; got != tt.aliased {
			t.Errorf("%s: aliased %v, want %v", tt.in, got, tt.aliased)
		}
		if string(v.Raw()) != tt.in {
			t.Errorf("%s: raw %q", tt.in, v.Raw())
		}
	}
}

func TestNavigation(t *testing.T) {
	d := mustParse(t, `{"a": [1, [2, 3], {"x": null}, true], "b": "s", "a": false, "e": {}, "f": []}`)
	root := d.Root()
	if root.Len() != 5 {
		t.Fatalf("len %d", root.Len())
	}
	var keys []string
	for k, v := range root.Members() {
		keys = append(keys, string(k.Str())+":"+v.Kind().String())
	}
	if got := strings.Join(keys, ","); got != "a:Array,b:String,a:False,e:Object,f:Array" {
		t.Errorf("members %s", got)
	}
	a, ok := root.Member("a")
	if !ok || a.Kind() != Array || a.Len() != 4 {
		t.Fatalf("first a: %v %d", a.Kind(), a.Len())
	}
	var kinds []string
	for i, e := range a.Elems() {
		kinds = append(kinds, e.Kind().String())
		if i == 1 && (e.Len() != 2 || string(e.Raw()) != "[2, 3]") {
			t.Errorf("a[1] = %q", e.Raw())
		}
	}
	if got := strings.Join(kinds, ","); got != "Number,Array,Object,True" {
		t.Errorf("elems %s", got)
	}
	if _, ok := root.Member("zz"); ok {
		t.Error("found missing member")
	}
	if _, ok := a.Member("a"); ok {
		t.Error("Member on an array")
	}
	e, _ := root.Member("e")
	if _, ok := e.First(); ok || e.Len() != 0 {
		t.Error("empty object has a first member")
	}
	for range e.Members() {
		t.Error("empty object yields a member")
	}
	if k, _ := root.Member("b"); k.Offset() != strings.Index(string(d.Input()), `"s"`) {
		t.Errorf("offset %d", k.Offset())
	}
}

// TestDocumentReuse: a released document's memory is reused without
// leaking the previous document's contents.
func TestDocumentReuse(t *testing.T) {
	for i := 0; i < 3; i++ {
		d, err := Parse([]byte(`{"k\n": ["a\tb", 1]}`), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		k, _ := d.Root().First()
		if string(k.Str()) != "k\n" || d.Root().Len() != 1 {
			t.Fatalf("round %d: %q", i, k.Str())
		}
		d.Release()
	}
	var nilDoc *Document
	nilDoc.Release()
}

// TestReserveIsAnUpperBound: the tape is sized once, before parsing, for
// any document shape, so a body never makes the parser regrow it by
// doubling. Regression: object members' values were not counted, and a
// body of 10^5 members allocated 37× its size.
func TestReserveIsAnUpperBound(t *testing.T) {
	docs := map[string]string{
		"object members": `{"instances":[{` + strings.Repeat(`"a":1,`, 100_000) + `"b":"x"}]}`,
		"nested objects": `[` + strings.Repeat(`{"k":{"v":[1,{}]}},`, 10_000) + `0]`,
		"number list":    `[` + strings.Repeat(`0,`, 100_000) + `0]`,
		"string list":    `[` + strings.Repeat(`"",`, 100_000) + `""]`,
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			d := new(Document)
			d.reserve([]byte(doc), ForElements(0, 64<<20).MaxValues)
			reserved := cap(d.nodes)
			if err := d.parse([]byte(doc), ForElements(0, 64<<20)); err != nil {
				t.Fatal(err)
			}
			if cap(d.nodes) != reserved {
				t.Errorf("tape regrown to %d nodes (%d used), reserve gave room for %d", cap(d.nodes), len(d.nodes), reserved)
			}
			if limit := len(doc)/2 + 1; reserved > limit {
				t.Errorf("reserved %d nodes for %d bytes, more than one per two bytes", reserved, len(doc))
			}
		})
	}
}
