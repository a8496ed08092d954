// Package jsontape is a JSON text parsed into a tape (a flat array of
// nodes in document order) that can be walked and searched like a DOM.
// Production reads JSON in one pass off jsontext's tokenizer; the tape is
// what the tests judge those readers by (the request, response and
// classify/regress oracles) and what the offline comparer (tfcompare)
// walks. It is built with jsontext's Tokenizer, so its syntax, errors and
// bounds are the production ones.
package jsontape

import (
	"bytes"
	"errors"
	"iter"
	"math"
	"sync"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
)

// Document is a parsed JSON text: a flat tape of nodes in document order
// (a container is followed by its children), held in pooled memory. Values
// point into it and into the input, which must stay unmodified until the
// document is released.
type Document struct {
	data   []byte  // the input
	nodes  []node  // the tape
	strs   []byte  // unescaped string contents (strings with escapes only)
	frames []frame // open containers during parsing
	pull   jsontext.Pull
}

// node is one entry of the tape.
type node struct {
	kind     jsontext.Kind
	escaped  bool   // a string whose contents are strs[b:b+a]
	off, end uint32 // its first byte in the input, one past its last
	a, b     uint32 // a container's count and the index after its subtree
	num      jsontext.Num
}

// frame is an open container: its node and its elements so far.
type frame struct {
	node  uint32
	count uint32
}

var docPool = sync.Pool{New: func() any { return new(Document) }}

// Parse parses data as TF Serving's rapidjson does (jsontext.Tokenizer:
// the first complete value is the document, whatever follows it is
// ignored). lim bounds nesting and the nodes; errors are
// *jsontext.SyntaxError. Call Release when done.
func Parse(data []byte, lim jsontext.Limits) (*Document, error) {
	d := docPool.Get().(*Document)
	if err := d.parse(data, lim); err != nil {
		d.Release()
		return nil, err
	}
	return d, nil
}

// ForElements is jsontext.ForElements.
func ForElements(maxDepth int, maxElements int64) jsontext.Limits {
	return jsontext.ForElements(maxDepth, maxElements)
}

func (d *Document) parse(data []byte, lim jsontext.Limits) error {
	d.data, d.nodes, d.strs, d.frames = data, d.nodes[:0], d.strs[:0], d.frames[:0]
	if len(data) > math.MaxUint32-1 {
		return &jsontext.SyntaxError{Msg: "Document is too large.", Offset: 0}
	}
	maxNodes := lim.MaxValues
	if maxNodes <= 0 || maxNodes > math.MaxInt32 {
		maxNodes = math.MaxInt32
	}
	d.reserve(data, maxNodes)
	p := &d.pull
	p.Reset(data, lim)
	for tok, ok := p.Next(); ok; tok, ok = p.Next() {
		d.add(tok, p.Pos())
	}
	var err *jsontext.SyntaxError
	if errors.As(p.Err(), &err) {
		return err
	}
	return nil
}

// add puts a token that ends at data[end] on the tape.
func (d *Document) add(tok jsontext.Token, end int) {
	n := node{kind: tok.ValueKind(), off: uint32(tok.Off), end: uint32(end), num: tok.Num}
	switch tok.Kind {
	case jsontext.EndArray, jsontext.EndObject:
		f := d.frames[len(d.frames)-1]
		d.frames = d.frames[:len(d.frames)-1]
		nd := &d.nodes[f.node]
		nd.end, nd.a, nd.b = uint32(end), f.count, uint32(len(d.nodes))
		return
	case jsontext.Key:
		d.frames[len(d.frames)-1].count++
		n.kind = jsontext.String
	default:
		d.addChild()
	}
	if tok.Kind == jsontext.BeginArray || tok.Kind == jsontext.BeginObject {
		d.frames = append(d.frames, frame{node: uint32(len(d.nodes))})
	}
	if n.kind == jsontext.String && !tok.InChunk {
		n.escaped, n.a, n.b = true, uint32(len(tok.Str)), uint32(len(d.strs))
		d.strs = append(d.strs, tok.Str...)
	}
	d.nodes = append(d.nodes, n)
}

// reserve sizes the tape for data before parsing, so even a document
// bigger than any the pooled tape has seen is parsed with one allocation
// instead of a chain of doublings. Every node but the root follows one
// structural byte: '[' (a first element), '{' (a first key), ':' (a
// member's value) or ',' (any later one); they are counted with the
// vectorized bytes.Count, which makes the estimate an upper bound. (It
// used to count only '[' and ',', so an object-heavy body — 10^5 members
// in one instance — regrew the tape by doubling: 37× its size allocated
// instead of 13×.) Those bytes inside strings can only inflate the
// estimate up to one node per two bytes, which a dense integer list
// ("0,0,0,…") legitimately reaches.
func (d *Document) reserve(data []byte, maxNodes int64) {
	if len(data) < 4096 {
		return
	}
	est := int64(1)
	for _, c := range []byte("[{:,") {
		est += int64(bytes.Count(data, []byte{c}))
	}
	est = min(est, int64(len(data)/2+1), maxNodes)
	if int64(cap(d.nodes)) < est {
		d.nodes = make([]node, 0, est)
	}
}

// addChild counts a new array element (object members are counted at
// their key).
func (d *Document) addChild() {
	if k := len(d.frames); k > 0 {
		f := &d.frames[k-1]
		if d.nodes[f.node].kind == jsontext.Array {
			f.count++
		}
	}
}

// Release returns the document's memory to a pool. Values and byte slices
// obtained from it (except those aliasing the input) must not be used
// afterwards.
func (d *Document) Release() {
	if d == nil {
		return
	}
	d.data = nil
	// Keep the buffers for reuse unless one grew unusually large, so a
	// single huge body does not pin its memory in the pool forever.
	if cap(d.nodes) > 1<<22 {
		d.nodes = nil
	}
	if cap(d.strs) > 1<<24 {
		d.strs = nil
	}
	docPool.Put(d)
}

// Root returns the top-level value.
func (d *Document) Root() Value { return Value{d: d, i: 0} }

// Input returns the bytes given to Parse (trailing content included).
func (d *Document) Input() []byte { return d.data }

// Value is one node of a Document. It is a small handle, passed by value;
// the zero Value is invalid (Valid reports false).
type Value struct {
	d *Document
	i int32
}

// Valid reports whether v refers to a node.
func (v Value) Valid() bool { return v.d != nil }

// Kind returns v's type.
func (v Value) Kind() jsontext.Kind { return v.d.nodes[v.i].kind }

// Offset returns the byte offset of v's first character in the input.
func (v Value) Offset() int { return int(v.d.nodes[v.i].off) }

// Raw returns v's token text exactly as it appears in the input (for a
// container, from its opening to its closing bracket).
func (v Value) Raw() []byte {
	n := &v.d.nodes[v.i]
	return v.d.data[n.off:n.end]
}

// Len returns the number of elements of an array or members of an object
// (0 for scalars).
func (v Value) Len() int {
	n := &v.d.nodes[v.i]
	if n.kind == jsontext.Array || n.kind == jsontext.Object {
		return int(n.a)
	}
	return 0
}

// First returns the first element of an array, or the key of the first
// member of an object (its value is key.Next()). ok is false when v is
// empty or not a container.
func (v Value) First() (Value, bool) {
	if v.Len() == 0 {
		return Value{}, false
	}
	return Value{v.d, v.i + 1}, true
}

// Next returns the node after v and its subtree: the next element of the
// enclosing array, or for an object key its value and for an object value
// the next key. The caller bounds the walk with the parent's Len.
func (v Value) Next() Value {
	n := &v.d.nodes[v.i]
	if n.kind == jsontext.Array || n.kind == jsontext.Object {
		return Value{v.d, int32(n.b)}
	}
	return Value{v.d, v.i + 1}
}

// Elems iterates an array's elements in order with their index.
func (v Value) Elems() iter.Seq2[int, Value] {
	return func(yield func(int, Value) bool) {
		e, ok := v.First()
		if !ok || v.Kind() != jsontext.Array {
			return
		}
		for i, n := 0, v.Len(); i < n; i++ {
			if !yield(i, e) {
				return
			}
			e = e.Next()
		}
	}
}

// Members iterates an object's members in document order (duplicates
// included), yielding each key (a jsontext.String value) and its value.
func (v Value) Members() iter.Seq2[Value, Value] {
	return func(yield func(Value, Value) bool) {
		k, ok := v.First()
		if !ok || v.Kind() != jsontext.Object {
			return
		}
		for i, n := 0, v.Len(); i < n; i++ {
			val := k.Next()
			if !yield(k, val) {
				return
			}
			k = val.Next()
		}
	}
}

// Member returns the value of the first member named key, as rapidjson's
// FindMember does (the first of duplicate keys wins).
func (v Value) Member(key string) (Value, bool) {
	if v.Kind() != jsontext.Object {
		return Value{}, false
	}
	for k, val := range v.Members() {
		if string(k.Str()) == key {
			return val, true
		}
	}
	return Value{}, false
}

// Str returns the unescaped contents of a string value or key (nil for
// other kinds). It aliases the input when the string has no escapes.
func (v Value) Str() []byte {
	n := &v.d.nodes[v.i]
	if n.kind != jsontext.String {
		return nil
	}
	if n.escaped {
		return v.d.strs[n.b : n.b+n.a : n.b+n.a]
	}
	return v.d.data[n.off+1 : n.end-1]
}

// IsNumber reports whether v is a number.
func (v Value) IsNumber() bool { return v.d.nodes[v.i].kind == jsontext.Number }

// Num returns v's number as the tokenizer read it (the zero Num, which is
// no integer and converts to 0, for other kinds).
func (v Value) Num() jsontext.Num { return v.d.nodes[v.i].num }
