package jsontext

import (
	"math"
	"strconv"
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

// SyntaxError is a document rapidjson 1.1.0 would reject: its message
// ("Invalid value.") and byte offset, for TF Serving's "JSON Parse error:
// <Msg> at offset: <Offset>".
type SyntaxError struct {
	Msg    string
	Offset int
}

// Error returns "<Msg> at offset: <Offset>".
func (e *SyntaxError) Error() string {
	return e.Msg + " at offset: " + strconv.Itoa(e.Offset)
}

// Limits bound what a reader builds from an untrusted text.
type Limits struct {
	// MaxDepth is the deepest nesting accepted (0: DefaultMaxDepth).
	MaxDepth int
	// MaxValues is the most values and keys a text may hold (0, or past maxValues: maxValues).
	MaxValues int64
}

// DefaultMaxDepth is Limits.MaxDepth when it is 0 (Triton's bound).
const DefaultMaxDepth = 100

// maxValues is the most values a text may hold (internal/jsontape's int32).
const maxValues = math.MaxInt32

// ForElements returns the limits for a text of at most maxElements tensor
// elements nested at most maxDepth deep, with generous room for the
// arrays, objects and keys around them.
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
