package jsontext

import (
	"iter"
	"math"
	"strconv"
	"sync"
)

// Kind is the type of a JSON value, named as rapidjson names its types
// (TF Serving prints these names in its messages: "Type: Number").
type Kind uint8

// The kinds, in rapidjson's order (kNullType … kNumberType).
const (
	Null Kind = iota
	False
	True
	Object
	Array
	String
	Number
)

var kindNames = [...]string{"Null", "False", "True", "Object", "Array", "String", "Number"}

// String returns rapidjson's name for the kind ("Null", "Number", …).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// SyntaxError is a document rapidjson 1.1.0 would reject. Msg is
// rapidjson's English message ("Invalid value.") and Offset the byte offset
// it reports, so TF Serving's "JSON Parse error: <Msg> at offset: <Offset>"
// can be reproduced exactly.
type SyntaxError struct {
	Msg    string
	Offset int
}

// Error returns "<Msg> at offset: <Offset>".
func (e *SyntaxError) Error() string {
	return e.Msg + " at offset: " + strconv.Itoa(e.Offset)
}

// Document is a parsed JSON text: a flat tape of nodes in document order
// (a container is followed by its children), held in pooled memory. Values
// point into it and into the input, which must stay unmodified until the
// document is released.
type Document struct {
	data   []byte  // the input
	nodes  []node  // the tape
	strs   []byte  // unescaped string contents (strings with escapes only)
	frames []frame // open containers during parsing
	tok    Tokenizer
}

var docPool = sync.Pool{New: func() any { return new(Document) }}

// Parse parses data as rapidjson 1.1.0 does with kParseIterativeFlag |
// kParseNanAndInfFlag | kParseStopWhenDoneFlag from a UTF-8 MemoryStream,
// as TF Serving calls it: a leading UTF-8 byte-order mark is skipped, the
// first complete value is the document and whatever follows it is ignored,
// a NUL byte ends the input, NaN/Inf/Infinity (optionally negative) are
// numbers, raw control characters in strings are rejected and UTF-8 is not
// validated.
//
// lim bounds nesting and the tape's nodes, so a hostile body cannot make
// it allocate without bound. Errors are *SyntaxError. Call Release when
// done.
func Parse(data []byte, lim Limits) (*Document, error) {
	d := docPool.Get().(*Document)
	if err := d.parse(data, lim.orDefault()); err != nil {
		d.Release()
		return nil, err
	}
	return d, nil
}

// Limits bound what a reader builds from an untrusted text.
type Limits struct {
	// MaxDepth is the deepest nesting accepted (0: DefaultMaxDepth).
	MaxDepth int
	// MaxValues is the most values and keys a text may hold (0 or more
	// than the tape can index: what it can index).
	MaxValues int64
}

// DefaultMaxDepth is Limits.MaxDepth when it is 0 (Triton's bound).
const DefaultMaxDepth = 100

// maxValues is what the tape can index: Value holds an int32.
const maxValues = math.MaxInt32

// ForElements returns the limits for a text that carries at most
// maxElements tensor elements nested at most maxDepth deep: room for
// every element and, generously, the arrays, objects and keys around
// them.
func ForElements(maxDepth int, maxElements int64) Limits {
	lim := Limits{MaxDepth: maxDepth}
	if maxElements > 0 && maxElements < (maxValues-(1<<16))/2 {
		lim.MaxValues = 2*maxElements + 1<<16
	}
	return lim.orDefault()
}

func (l Limits) orDefault() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxValues <= 0 || l.MaxValues > maxValues {
		l.MaxValues = maxValues
	}
	return l
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
func (v Value) Kind() Kind { return v.d.nodes[v.i].kind }

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
	if n.kind == Array || n.kind == Object {
		return int(n.count())
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
	if n.kind == Array || n.kind == Object {
		return Value{v.d, int32(n.next())}
	}
	return Value{v.d, v.i + 1}
}

// Elems iterates an array's elements in order with their index.
func (v Value) Elems() iter.Seq2[int, Value] {
	return func(yield func(int, Value) bool) {
		e, ok := v.First()
		if !ok || v.Kind() != Array {
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
// included), yielding each key (a String value) and its value.
func (v Value) Members() iter.Seq2[Value, Value] {
	return func(yield func(Value, Value) bool) {
		k, ok := v.First()
		if !ok || v.Kind() != Object {
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
	if v.Kind() != Object {
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
	if n.kind != String {
		return nil
	}
	if n.flags&flagEscaped != 0 {
		off, ln := uint32(n.bits), uint32(n.bits>>32)
		return v.d.strs[off : off+ln : off+ln]
	}
	return v.d.data[n.off+1 : n.end-1]
}

// IsNumber reports whether v is a number; Num classifies and converts
// it as rapidjson does (docs/tfserving-rest.md §3).
func (v Value) IsNumber() bool { return v.d.nodes[v.i].kind == Number }
