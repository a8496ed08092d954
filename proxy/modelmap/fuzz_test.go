package modelmap

import (
	"errors"
	"regexp"
	"slices"
	"testing"
)

// FuzzParse: any document either parses or fails with an *Error; a
// parsed map is internally consistent (every model's server exists).
func FuzzParse(f *testing.F) {
	f.Add([]byte(fullMap))
	f.Add([]byte("models:\n  m:\n    labels: {a: 1}\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte(dedented))
	f.Add([]byte("models:\n  m: {model: a,\n    labels: {}\n"))
	f.Add([]byte("models: {m: {metadata: {inputs: [{name: a, datatype: FP32, shape: [-1]}]}}}\n"))
	f.Add([]byte(splitMap))
	f.Fuzz(func(t *testing.T, doc []byte) {
		m, err := Parse(doc)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			lines := 1 + len(regexp.MustCompile("\r\n|[\r\n\u0085\u2028\u2029]").FindAllIndex(doc, -1))
			if e.Line < 0 || e.Line > lines {
				t.Fatalf("%v: line %d, the document has %d", e, e.Line, lines)
			}
			return
		}
		for name, mm := range m.Models {
			if mm.Server != DefaultServer && m.Server(mm.Server) == nil {
				t.Fatalf("model %q on undefined server %q", name, mm.Server)
			}
			if mm.Default == nil || mm.Default.Model == "" {
				t.Fatalf("model %q has no v2 model", name)
			}
			if mm.Split != nil {
				// A valid split always picks one of its own servers.
				if got := mm.Split.Pick(""); !slices.Contains(mm.Split.Servers(), got) || got != DefaultServer && m.Server(got) == nil {
					t.Fatalf("model %q: split %+v picked %q", name, mm.Split, got)
				}
			}
		}
	})
}
