package jsontape

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
)

// FuzzTape: a parsed document is internally consistent, and every
// document encoding/json accepts (no NaN, no out-of-range exponent) parses
// to the same structure.
func FuzzTape(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5e3, -0, "x\u00e9\n"], "b": {"c": null, "d": [true, false]}}`,
		`[NaN, -Infinity, 1e400, 18446744073709551616]`, `"\ud83d\ude00"`, "\xEF\xBB\xBF{}", `[[[[]]]]`, `{"a":1,"a":2}`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	lim := jsontext.ForElements(32, 1<<12)
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data, lim)
		if err != nil {
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
	case jsontext.Array:
		n := 0
		for _, e := range v.Elems() {
			walk(t, e, depth+1)
			n++
		}
		if n != v.Len() {
			t.Fatalf("array yields %d of %d", n, v.Len())
		}
	case jsontext.Object:
		n := 0
		for k, e := range v.Members() {
			if k.Kind() != jsontext.String {
				t.Fatalf("key kind %v", k.Kind())
			}
			_ = k.Str()
			walk(t, e, depth+1)
			n++
		}
		if n != v.Len() {
			t.Fatalf("object yields %d of %d", n, v.Len())
		}
	case jsontext.String:
		if len(v.Str()) > len(v.Raw()) {
			t.Fatal("unescaped string longer than its token")
		}
	case jsontext.Number:
		_ = v.Num().Float64()
	}
}

// shapeOf renders the kinds and sizes of a value (numbers and strings as
// placeholders) to compare structures.
func shapeOf(v Value) string {
	switch v.Kind() {
	case jsontext.Array:
		var b strings.Builder
		b.WriteString("[")
		for _, e := range v.Elems() {
			b.WriteString(shapeOf(e) + ",")
		}
		return b.String() + "]"
	case jsontext.Object:
		return "{map}" // encoding/json keeps neither order nor duplicates
	case jsontext.True, jsontext.False:
		return "b"
	case jsontext.Null:
		return "n"
	case jsontext.String:
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
