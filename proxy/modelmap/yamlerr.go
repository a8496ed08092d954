package modelmap

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// This file turns the YAML library's errors into *Error values that name
// the right line and the field path, and finds the line of a field path
// for the errors validate reports.

// path is a field path in the map document: mapping keys and list
// indexes.
type path []step

type step struct {
	key   string
	index int // when key is "" and isIdx
	isIdx bool
}

func (p path) key(k string) path  { return append(p[:len(p):len(p)], step{key: k}) }
func (p path) index(i int) path   { return append(p[:len(p):len(p)], step{index: i, isIdx: true}) }
func keyPath(keys ...string) path { return path{}.keys(keys...) }

func (p path) keys(keys ...string) path {
	for _, k := range keys {
		p = p.key(k)
	}
	return p
}

// String renders p as "models.mnist.metadata.inputs[0]"; a key that
// would read ambiguously is quoted.
func (p path) String() string {
	if len(p) == 0 {
		return "top level"
	}
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.isIdx:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
			continue
		case i > 0:
			b.WriteByte('.')
		}
		if s.key == "" || strings.ContainsAny(s.key, ".[]\" \t\n") {
			b.WriteString(strconv.Quote(s.key))
		} else {
			b.WriteString(s.key)
		}
	}
	return b.String()
}

// lineOf returns the line of the field p names: its key's line, or for a
// list item the item's. Where the document lacks the field (an inherited
// or missing one), it is the line of the nearest enclosing field.
func lineOf(root *yaml.Node, p path) int {
	n, line := root, root.Line
	for _, s := range p {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		var next *yaml.Node
		switch {
		case s.isIdx && n.Kind == yaml.SequenceNode && s.index < len(n.Content):
			next = n.Content[s.index]
			line = next.Line
		case !s.isIdx && n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == s.key {
					next = n.Content[i+1]
					line = n.Content[i].Line
					break
				}
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return line
}

// walk calls fn for every node under n with its path and, for a mapping
// value, its key node. Aliases are not followed: the decoder reports an
// error at the anchored node.
func walk(n *yaml.Node, p path, key *yaml.Node, fn func(p path, key, val *yaml.Node)) {
	fn(p, key, n)
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			walk(n.Content[i+1], p.key(n.Content[i].Value), n.Content[i], fn)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			walk(c, p.index(i), nil, fn)
		}
	}
}

// syntaxError turns the YAML parser's "yaml: line 3: ..." into an *Error
// on the line at fault. The parser reports where the enclosing block
// began (counted from 0 for "did not find expected ..."), so a dedented
// "labels:" on line 8 comes out as line 1 or 5; problemLine finds the
// line again.
func syntaxError(data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n != 1 {
		return &Error{Msg: "invalid YAML: " + msg}
	}
	_, problem, _ := strings.Cut(msg, ": ")
	if parserProblems[problem] {
		line++
	}
	// A problem at the end of the text is on its last line.
	last := len(lineBreaks.FindAllIndex(data, -1))
	if len(data) > 0 && data[len(data)-1] != '\n' && data[len(data)-1] != '\r' {
		last++
	}
	line = min(line, max(last, 1))
	if bytes.IndexByte(data, '\r') < 0 && !otherBreaks.Match(data) {
		line = problemLine(data, problem, line)
	}
	return &Error{Line: line, Msg: "invalid YAML: " + problem}
}

// parserProblems are the problems the YAML parser (not its scanner)
// reports, with a line counted from 0.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'": true, "did not find expected ',' or '}'": true,
	"did not find expected '-' indicator": true, "did not find expected <document start>": true,
	"did not find expected key": true, "did not find expected node content": true,
	"found duplicate %TAG directive": true, "found duplicate %YAML directive": true,
	"found incompatible YAML document": true, "found undefined tag handle": true,
}

// lineBreaks are YAML's line breaks; problemLine cuts at "\n" only, so
// a document with "\r" or otherBreaks keeps the parser's line.
var (
	lineBreaks  = regexp.MustCompile("\r\n|[\r\n\u0085\u2028\u2029]")
	otherBreaks = regexp.MustCompile("[\u0085\u2028\u2029]")
)

// problemScanBudget bounds the bytes problemLine parses again: a map of
// a few KiB is searched in full (a dozen parses), a huge one keeps the
// parser's line rather than cost seconds.
const problemScanBudget = 8 << 20

// problemLine returns the line at which the document goes wrong: the line
// k such that the document cut just before it parses and cut just after
// it fails with the same problem, found by bisection (a document cut
// after the bad line fails however it goes on). Without such a line (an
// unclosed bracket: the cut before fails too), or past
// problemScanBudget, it is the block start the parser reported, which is
// where such a problem begins.
func problemLine(data []byte, problem string, blockStart int) int {
	var ends []int // ends[k-1]: the end of line k
	for i, c := range data {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	spent := 0
	parse := func(k int) (withinBudget bool, err error) {
		var n yaml.Node
		end := 0
		if k > 0 {
			end = ends[k-1]
		}
		spent += end
		return spent <= problemScanBudget, yaml.Unmarshal(data[:end], &n)
	}
	lo, hi := max(blockStart, 1), len(ends) // the whole document fails
	for lo < hi {
		mid := (lo + hi) / 2
		ok, err := parse(mid)
		if !ok {
			return blockStart
		}
		if err != nil && strings.HasSuffix(err.Error(), ": "+problem) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if ok, err := parse(lo - 1); err != nil || !ok {
		return blockStart
	}
	return lo
}

// decodeError turns the first error of the strict decode (an unknown key,
// a duplicate key, a value of the wrong type) into an *Error naming the
// field path, found in the node tree by the line the decoder reports.
func decodeError(root *yaml.Node, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		// e.g. "document contains excessive aliasing"
		return &Error{Msg: "invalid map: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var line int
	msg := te.Errors[0]
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n != 1 {
		return &Error{Msg: msg}
	}
	_, msg, _ = strings.Cut(msg, ": ")
	// Each case finds the node the decoder refused, the last one of the
	// line that fits (the innermost of a flow mapping's nodes).
	var at path
	var atNode *yaml.Node
	match := func(pred func(key, val *yaml.Node) bool) {
		walk(root, nil, nil, func(p path, key, val *yaml.Node) {
			if pred(key, val) {
				at, atNode = p, val
			}
		})
	}
	if rest, ok := strings.CutPrefix(msg, "field "); ok {
		if i := strings.LastIndex(rest, " not found in type "); i >= 0 {
			name, typ := rest[:i], rest[i+len(" not found in type "):]
			match(func(k, _ *yaml.Node) bool { return k != nil && k.Line == line && k.Value == name })
			at = parent(at)
			msg = fmt.Sprintf("unknown key %q (want %s)", name, strings.Join(keysOf(typ), ", "))
		}
	} else if rest, ok := strings.CutPrefix(msg, "mapping key "); ok {
		if i := strings.LastIndex(rest, " already defined at line "); i >= 0 {
			name, _ := strconv.Unquote(rest[:i])
			match(func(k, _ *yaml.Node) bool { return k != nil && k.Line == line && k.Value == name })
			at = parent(at)
			msg = fmt.Sprintf("duplicate key %q (first on line %s)", name, rest[i+len(" already defined at line "):])
		}
	} else if rest, ok := strings.CutPrefix(msg, "cannot unmarshal "); ok {
		if i := strings.LastIndex(rest, " into "); i >= 0 {
			tag, value, _ := strings.Cut(rest[:i], " ")
			value = strings.TrimSuffix(strings.Trim(value, "`"), "...")
			match(func(_, v *yaml.Node) bool {
				return v.Line == line && v.ShortTag() == tag && strings.HasPrefix(v.Value, value)
			})
			msg = "want " + describeType(rest[i+len(" into "):])
			if atNode != nil {
				msg += ", not " + describe(atNode)
			}
		}
	}
	e := &Error{Line: line, Msg: msg}
	if atNode != nil {
		e.Path = at.String()
	}
	return e
}

// parent is the path of the mapping holding the key at p.
func parent(p path) path {
	if len(p) == 0 {
		return p
	}
	return p[:len(p)-1]
}

func describe(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.ShortTag() == "!!null":
		return "empty"
	}
	return strconv.Quote(n.Value)
}

// describeType names a Go type of the decode in the format's terms.
func describeType(typ string) string {
	typ = strings.TrimLeft(typ, "*")
	switch {
	case typ == "string":
		return "a string"
	case typ == "modelmap.integer" || strings.HasPrefix(typ, "int"):
		return "an integer"
	case strings.HasPrefix(typ, "float"):
		return "a number"
	case strings.HasPrefix(typ, "[]"):
		return "a list"
	}
	return "a mapping"
}

// keysOf lists the keys the decode accepts for a struct type, by the type
// name the decoder reports ("modelmap.rawModel").
func keysOf(typ string) []string { return structKeys()[typ] }

// structKeys maps every struct type reachable from rawMap to its YAML
// keys, inline structs' keys included: the "want" lists of unknown-key
// errors come from the types, not from a hand-kept list.
var structKeys = sync.OnceValue(func() map[string][]string {
	out := map[string][]string{}
	var visit func(t reflect.Type) []string
	visit = func(t reflect.Type) []string {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Map || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
		if keys, ok := out[t.String()]; ok {
			return keys
		}
		var keys []string
		for f := range t.Fields() {
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if opts == "inline" {
				keys = append(keys, visit(f.Type)...)
				continue
			}
			keys = append(keys, name)
			visit(f.Type)
		}
		out[t.String()] = keys
		return keys
	}
	visit(reflect.TypeFor[rawMap]())
	return out
})
