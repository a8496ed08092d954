package jsontape

import (
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
)

func mustParse(t *testing.T, s string) *Document {
	t.Helper()
	d, err := Parse([]byte(s), jsontext.Limits{})
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	t.Cleanup(d.Release)
	return d
}

// TestStopWhenDone: the first complete value is the document.
func TestStopWhenDone(t *testing.T) {
	for _, s := range []string{"\xEF\xBB\xBF{\"a\":[1]}", `{"a":[1]} junk`, `{"a":[1]}}`, "{\"a\":[1]}\x00garbage", `{"a":[1]}{"b":2}`} {
		d := mustParse(t, s)
		if d.Root().Kind() != jsontext.Object || d.Root().Len() != 1 {
			t.Errorf("%q: root %v len %d", s, d.Root().Kind(), d.Root().Len())
		}
		if got := string(d.Root().Raw()); got != `{"a":[1]}` {
			t.Errorf("%q: raw %q", s, got)
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
	if !ok || a.Kind() != jsontext.Array || a.Len() != 4 {
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
		d, err := Parse([]byte(`{"k\n": ["a\tb", 1]}`), jsontext.Limits{})
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
			d.reserve([]byte(doc), jsontext.ForElements(0, 64<<20).MaxValues)
			reserved := cap(d.nodes)
			if err := d.parse([]byte(doc), jsontext.ForElements(0, 64<<20)); err != nil {
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

// TestDumpHugeDocumentIsCheap: the walk stops at the mark, so dumping a
// big document costs the prefix, not the document: the destination and
// the writer's container stack are the only allocations.
func TestDumpHugeDocumentIsCheap(t *testing.T) {
	d := mustParse(t, "["+strings.Repeat("123456789, ", 100000)+"0]")
	allocs := testing.AllocsPerRun(10, func() { _ = AppendDump(make([]byte, 0, 512), d.Root()) })
	if allocs > 2 {
		t.Errorf("%v allocations per dump", allocs)
	}
}
