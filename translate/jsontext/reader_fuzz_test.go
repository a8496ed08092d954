package jsontext

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// FuzzReader: no input panics; errors are *SyntaxError with an offset
// inside the input; a parsed document is internally consistent, and every
// document encoding/json accepts (no NaN, no out-of-range exponent) parses
// to the same structure.
func FuzzReader(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5e3, -0, "x\u00e9\n"], "b": {"c": null, "d": [true, false]}}`,
		`[NaN, -Infinity, 1e400, 18446744073709551616]`, `"\ud83d\ude00"`, "\xEF\xBB\xBF{}", `[[[[]]]]`, `{"a":1,"a":2}`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	lim := ForElements(32, 1<<12)
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data, lim)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(data) || se.Msg == "" {
				t.Fatalf("bad error %#v", err)
			}
			// Valid JSON is only refused for rapidjson's exponent bound, a
			// lone high surrogate, or our limits.
			if json.Valid(data) && se.Msg != msgNumberTooBig && se.Msg != msgSurrogateInvalid && se.Msg != msgTooDeep && se.Msg != msgTooManyVals {
				t.Fatalf("valid JSON %q refused: %v", data, err)
			}
			return
		}
		defer d.Release()
		root := d.Root()
		if end := root.Offset() + len(root.Raw()); end > len(data) {
			t.Fatalf("root raw ends at %d of %d", end, len(data))
		}
		walk(t, root, 0)
		if json.Valid(root.Raw()) {
			var v any
			if json.Unmarshal(root.Raw(), &v) == nil && !strings.ContainsAny(string(root.Raw()), "\\") {
				if got, want := shapeOf(root), shapeOfAny(v); got != want {
					t.Fatalf("structure %s, encoding/json %s", got, want)
				}
			}
		}
	})
}

func walk(t *testing.T, v Value, depth int) {
	if depth > 64 {
		t.Fatal("walk too deep")
	}
	switch v.Kind() {
	case Array:
		n := 0
		for _, e := range v.Elems() {
			walk(t, e, depth+1)
			n++
		}
		if n != v.Len() {
			t.Fatalf("array yields %d of %d", n, v.Len())
		}
	case Object:
		n := 0
		for k, e := range v.Members() {
			if k.Kind() != String {
				t.Fatalf("key kind %v", k.Kind())
			}
			_ = k.Str()
			walk(t, e, depth+1)
			n++
		}
		if n != v.Len() {
			t.Fatalf("object yields %d of %d", n, v.Len())
		}
	case String:
		if len(v.Str()) > len(v.Raw()) {
			t.Fatal("unescaped string longer than its token")
		}
		if n, q := quotedLen(v.Str()), AppendString(nil, v.Str()); n != len(q) {
			t.Fatalf("quotedLen %d for %q", n, q)
		}
	case Number:
		_ = v.Num().Float64()
	}
	checkDump(t, v)
}

// checkDump: a dump is the whole rendering cut at a token boundary, and it
// is only cut once it has reached DumpLimit bytes.
func checkDump(t *testing.T, v Value) {
	got := Dump(v)
	full := string(appendDump(nil, v, math.MaxInt))
	if !strings.HasPrefix(full, got) {
		t.Fatalf("dump %q is not a prefix of the rendering %q", got, full)
	}
	if len(got) < len(full) && len(got) < DumpLimit {
		t.Fatalf("dump %q cut at %d bytes, under the limit", got, len(got))
	}
}

// shapeOf renders the kinds and sizes of a value (numbers and strings as
// placeholders) to compare structures.
func shapeOf(v Value) string {
	switch v.Kind() {
	case Array:
		var b strings.Builder
		b.WriteString("[")
		for _, e := range v.Elems() {
			b.WriteString(shapeOf(e) + ",")
		}
		return b.String() + "]"
	case Object:
		return "{map}" // encoding/json keeps neither order nor duplicates
	case True, False:
		return "b"
	case Null:
		return "n"
	case String:
		return "s"
	}
	return "#"
}

func shapeOfAny(v any) string {
	switch x := v.(type) {
	case []any:
		var b strings.Builder
		b.WriteString("[")
		for _, e := range x {
			b.WriteString(shapeOfAny(e) + ",")
		}
		return b.String() + "]"
	case map[string]any:
		return "{map}"
	case bool:
		return "b"
	case nil:
		return "n"
	case string:
		return "s"
	}
	return "#"
}
