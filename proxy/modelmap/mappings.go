package modelmap

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// maxKeyPairs bounds the work of the YAML decoder's duplicate-key check,
// which compares every pair of keys of every mapping it decodes (and
// records an error per duplicate pair): a 4 MiB file of one mapping would
// take minutes and, all keys equal, gigabytes. 25M pairs is about 7,000
// keys in one mapping, far beyond a real map, and well under a second.
const maxKeyPairs = 25_000_000

// checkMappings runs before the decoder, in linear time: it refuses a
// duplicate key (the decoder's own check would say the same, in
// quadratic time) and a document whose mappings, aliases expanded, would
// cost the decoder more than maxKeyPairs key comparisons.
func checkMappings(root *yaml.Node) error {
	var dup *Error
	cost := map[*yaml.Node]int{} // pairs under a node, aliases expanded
	var largest *yaml.Node       // the mapping with the most keys
	var largestPath path
	var visit func(n *yaml.Node, p path) int
	visit = func(n *yaml.Node, p path) int {
		if n.Kind == yaml.AliasNode {
			if n.Alias == nil {
				return 0
			}
			if c, ok := cost[n.Alias]; ok {
				return c
			}
			return 0 // an alias to an enclosing node: the parser refuses those
		}
		total := 0
		switch n.Kind {
		case yaml.MappingNode:
			keys := len(n.Content) / 2
			total = keys * (keys - 1) / 2
			if largest == nil || keys > len(largest.Content)/2 {
				largest, largestPath = n, p
			}
			first := make(map[string]int, keys)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				if line, seen := first[k.Value]; seen && k.Kind == yaml.ScalarNode && dup == nil {
					dup = &Error{Line: k.Line, Path: p.String(), Msg: fmt.Sprintf("duplicate key %q (first on line %d)", k.Value, line)}
				} else if !seen {
					first[k.Value] = k.Line
				}
				total += visit(n.Content[i+1], p.key(k.Value))
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				total += visit(c, p.index(i))
			}
		case yaml.DocumentNode:
			for _, c := range n.Content {
				total += visit(c, p)
			}
		}
		total = min(total, maxKeyPairs+1) // no overflow, however deep
		cost[n] = total
		return total
	}
	if visit(root, nil) > maxKeyPairs {
		if keys := len(largest.Content) / 2; keys*(keys-1)/2 > maxKeyPairs {
			return &Error{Line: lineOf(root, largestPath), Path: largestPath.String(),
				Msg: fmt.Sprintf("%d keys in one mapping: a model map may hold about 7,000", keys)}
		}
		return &Error{Msg: fmt.Sprintf("the map is too large: its mappings, aliases expanded, would take the YAML decoder more than %d key comparisons", maxKeyPairs)}
	}
	if dup != nil {
		return dup
	}
	return nil
}
