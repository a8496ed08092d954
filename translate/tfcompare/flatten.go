package tfcompare

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/tfsbridge/tfsbridge/translate/internal/jsontape"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
)

// Kind is the form of an answer.
type Kind uint8

// The answer forms TF Serving's REST API writes.
const (
	Invalid     Kind = iota // not JSON, or JSON of no known form
	Predictions             // predict, row format: {"predictions": [...]}
	Outputs                 // predict, columnar format: {"outputs": ...}
	Classify                // {"results": [[["label", score], ...], ...]}
	Regress                 // {"results": [score, ...]}
	Error                   // a status other than 200, or {"error": "..."}
)

var kindNames = [...]string{"invalid", "predictions", "outputs", "classify", "regress", "error"}

func (k Kind) String() string { return kindNames[k] }

// DType is an output's type as its JSON tells it (TF Serving writes
// floating-point numbers with a decimal point or exponent, integers
// without, bytes as {"b64": ...}).
type DType uint8

// The JSON dtypes.
const (
	NoDType DType = iota // no elements
	Float
	Int
	Bool
	String
	Bytes
	Mixed // elements of kinds that do not go together (a null, a string among numbers)
)

var dtypeNames = [...]string{"none", "float", "int", "bool", "string", "bytes", "mixed"}

func (d DType) String() string { return dtypeNames[d] }

// numeric reports whether the dtype's elements are numbers.
func (d DType) numeric() bool { return d == Float || d == Int }

// leaf is one tensor element.
type leaf struct {
	dt DType // Float, Int, Bool, String, Bytes or Mixed
	f  float64
	i  int64  // Int only
	s  []byte // String, Bytes (the base64 text); aliases the document
}

// flatOut is one output of one answer: its elements are vals[start:end],
// its shape dims[dimStart:dimEnd].
type flatOut struct {
	name              string
	start, end        int
	dimStart, dimEnd  int
	dt                DType
	ragged, rankFixed bool
}

// side is one parsed answer.
type side struct {
	doc     *jsontape.Document
	kind    Kind
	status  int
	errText string
	outs    []flatOut
	vals    []leaf
	dims    []int64
}

// maxErrorText bounds an error text kept from an answer.
const maxErrorText = 512

func (s *side) reset() {
	if s.doc != nil {
		s.doc.Release()
		s.doc = nil
	}
	s.kind, s.status, s.errText = Invalid, 0, ""
	// Keep the buffers for the next answer unless one huge answer grew
	// them: a long-lived Comparer must not pin its largest answer's memory.
	if cap(s.vals) > maxKeptElements {
		s.vals = nil
	}
	s.outs, s.vals, s.dims = s.outs[:0], s.vals[:0], s.dims[:0]
}

// maxKeptElements bounds the element buffer a side keeps between
// answers (48 bytes each).
const maxKeptElements = 1 << 18

// load parses an answer into s. The answer is walked as a tape
// (internal/jsontape), not read in one pass as production reads JSON:
// comparing two answers held whole needs random access (each row's member
// by name), and the comparer is an offline tool.
func (s *side) load(a Answer, lim jsontext.Limits) {
	s.reset()
	s.status = a.Status
	doc, err := jsontape.Parse(a.Body, lim)
	if err != nil {
		s.kind = Invalid
		if a.Status != http.StatusOK {
			s.kind = Error
		}
		s.errText = clip(a.Body)
		if s.kind == Invalid {
			s.errText = "answer is not JSON: " + err.Error()
		}
		return
	}
	s.doc = doc
	root := doc.Root()
	if e, ok := root.Member("error"); ok || a.Status != http.StatusOK {
		s.kind = Error
		if ok && e.Kind() == jsontext.String {
			s.errText = clip(e.Str())
		} else {
			s.errText = clip(a.Body)
		}
		return
	}
	if v, ok := root.Member("predictions"); ok && v.Kind() == jsontext.Array {
		s.kind = Predictions
		s.rows(v)
		return
	}
	if v, ok := root.Member("outputs"); ok {
		s.kind = Outputs
		if v.Kind() == jsontext.Object && !isB64(v) {
			for k, val := range v.Members() {
				if s.find(string(k.Str())) == nil { // the first of duplicate keys, as rapidjson's FindMember
					s.one(string(k.Str()), val)
				}
			}
			return
		}
		s.one("outputs", v)
		return
	}
	if v, ok := root.Member("results"); ok && v.Kind() == jsontext.Array {
		if first, ok := v.First(); ok && first.Kind() == jsontext.Array {
			s.kind = Classify
			s.classify(v)
			return
		}
		s.kind = Regress
		s.one("results", v)
		return
	}
	s.errText = "answer has none of predictions, outputs, results or error"
}

// clip copies at most maxErrorText bytes of b.
func clip(b []byte) string {
	if len(b) > maxErrorText {
		return string(b[:maxErrorText]) + "…"
	}
	return string(b)
}

// one flattens a whole tensor v as output name.
func (s *side) one(name string, v jsontape.Value) {
	o := s.open(name)
	s.flatten(o, v, 0)
	s.close(o)
}

// rows flattens predict's row format: a list of batch items, each the
// single output's value or an object of named outputs. The single output
// of a row-format answer has no name in TF's JSON: it is "predictions".
func (s *side) rows(v jsontape.Value) {
	first, ok := v.First()
	if !ok || first.Kind() != jsontext.Object || isB64(first) {
		s.one("predictions", v)
		return
	}
	n := v.Len()
	for k := range first.Members() {
		name := string(k.Str())
		if s.find(name) != nil {
			continue // a duplicate key: Member finds the first
		}
		o := s.open(name)
		s.dims = append(s.dims, int64(n))
		for _, row := range v.Elems() {
			val, ok := jsontape.Value{}, false
			if row.Kind() == jsontext.Object {
				val, ok = row.Member(name)
			}
			if !ok {
				o.ragged = true
				continue
			}
			s.flatten(o, val, 1)
		}
		s.close(o)
	}
}

// classify flattens classify's results into "classes" (the labels) and
// "scores", both [examples, classes].
func (s *side) classify(v jsontape.Value) {
	for part, name := range []string{"classes", "scores"} {
		o := s.open(name)
		s.dims = append(s.dims, int64(v.Len()))
		width := -1
		for _, ex := range v.Elems() {
			if ex.Kind() != jsontext.Array || (width >= 0 && ex.Len() != width) {
				o.ragged = true
				continue
			}
			width = ex.Len()
			for _, pair := range ex.Elems() {
				p, ok := pair.First()
				if !ok || pair.Kind() != jsontext.Array || pair.Len() != 2 {
					o.ragged = true
					continue
				}
				if part == 1 {
					p = p.Next()
				}
				s.addLeaf(o, p)
			}
		}
		s.dims = append(s.dims, int64(max(width, 0)))
		s.close(o)
	}
}

// isB64 reports whether v is a bytes element, {"b64": "..."}, rather
// than an object of named outputs.
func isB64(v jsontape.Value) bool {
	b, ok := v.Member("b64")
	return ok && v.Len() == 1 && b.Kind() == jsontext.String
}

// find returns the output named name, nil when there is none.
func (s *side) find(name string) *flatOut {
	for i := range s.outs {
		if s.outs[i].name == name {
			return &s.outs[i]
		}
	}
	return nil
}

// open starts an output; close ends it. o stays valid in between because
// nothing else appends to s.outs.
func (s *side) open(name string) *flatOut {
	s.outs = append(s.outs, flatOut{name: name, start: len(s.vals), dimStart: len(s.dims)})
	return &s.outs[len(s.outs)-1]
}

func (s *side) close(o *flatOut) {
	o.end, o.dimEnd = len(s.vals), len(s.dims)
	o.rankFixed = true
	if !o.ragged {
		n := int64(1)
		for _, d := range s.dims[o.dimStart:o.dimEnd] {
			n *= d
		}
		o.ragged = n != int64(o.end-o.start)
	}
}

// flatten appends v's elements, learning the shape from the first path
// down and marking the output ragged where another path disagrees.
func (s *side) flatten(o *flatOut, v jsontape.Value, depth int) {
	rank := len(s.dims) - o.dimStart
	if v.Kind() != jsontext.Array {
		if !o.rankFixed {
			o.rankFixed = true
		} else if depth != rank {
			o.ragged = true
		}
		s.addLeaf(o, v)
		return
	}
	n := v.Len()
	switch {
	case depth == rank && !o.rankFixed:
		s.dims = append(s.dims, int64(n))
		if n == 0 {
			o.rankFixed = true
		}
	case depth >= rank || s.dims[o.dimStart+depth] != int64(n):
		o.ragged = true
		return
	}
	for _, e := range v.Elems() {
		s.flatten(o, e, depth+1)
	}
}

// addLeaf appends one element and folds its kind into the output's dtype.
func (s *side) addLeaf(o *flatOut, v jsontape.Value) {
	l := leaf{dt: Mixed}
	switch v.Kind() {
	case jsontext.Number:
		l = numLeaf(v.Num())
	case jsontext.True, jsontext.False:
		l.dt = Bool
		if v.Kind() == jsontext.True {
			l.f = 1
		}
	case jsontext.String:
		l.dt, l.s = String, v.Str()
	case jsontext.Object:
		if isB64(v) {
			b, _ := v.Member("b64")
			l.dt, l.s = Bytes, b.Str()
		}
	}
	s.push(o, l)
}

// numLeaf is the element a number token holds.
func numLeaf(n jsontext.Num) leaf {
	if n.IsInt64() {
		return leaf{dt: Int, i: n.Int64(), f: float64(n.Int64())}
	}
	return leaf{dt: Float, f: n.Float64()}
}

// push appends element l to output o and folds its kind into the
// output's dtype.
func (s *side) push(o *flatOut, l leaf) {
	s.vals = append(s.vals, l)
	switch {
	case o.dt == NoDType || o.dt == l.dt:
		o.dt = l.dt
	case o.dt.numeric() && l.dt.numeric():
		o.dt = Float
	default:
		o.dt = Mixed
	}
}

// shapeText writes a shape as TF's JSON would nest it: [2 3].
func shapeText(dims []int64) string {
	b := []byte{'['}
	for i, d := range dims {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	return string(append(b, ']'))
}

// sameLeaf reports whether two elements are the same: same kind and
// value, NaN equal to NaN.
func sameLeaf(a, b *leaf) bool {
	return a.dt == b.dt && a.i == b.i && (a.f == b.f || (a.f != a.f && b.f != b.f)) && bytes.Equal(a.s, b.s)
}
