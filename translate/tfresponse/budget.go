package tfresponse

import (
	"math"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// The output budget. A predict body is normally a few times the size of
// the tensors it prints (a BOOL byte becomes "false, "), but three things
// in a v2 answer can make it arbitrarily larger without the answer itself
// growing: a zero dimension after large ones (shape [60000000, 0] holds
// no data yet prints sixty million "[]"), a high rank (every nesting level
// adds four spaces of indentation to every line of a columnar body), and
// long output names in multi-output row format (each name is printed once
// per batch row). Predict therefore refuses to write a body whose size
// bound exceeds maxExpansion times the tensors' own bytes plus
// minBudget: a 75-byte v2 answer must not cost gigabytes.
//
// maxExpansion leaves room for every real layout. The two worst are a
// columnar BOOL tensor, whose bound per one-byte element is 4·rank + 23
// bytes (under 128 up to rank 26), and several rank-1 BOOL or UINT8
// outputs in row format, where each one-byte element is printed with its
// output's name and about 20 bytes of layout (the bound stays under 128
// for names up to about 90 bytes). minBudget lets small answers with empty dimensions through
// (a batch of 1000 rows without detections, [1000, 0, 4], is a 6 KB body).
const (
	maxExpansion = 128
	minBudget    = 1 << 20
)

// checkBudget returns a BadGateway error when the body Predict would write
// for outputs (already checked by sortedOutputs, and by the row checks when
// batch >= 0) could exceed the budget: maxExpansion times their bytes plus
// minBudget, and at most maxBytes when that is positive (the operator's
// cap, in proportion to the body limit). Predict is only ever given a v2
// server's outputs, so an answer that cannot be written within bounded
// memory is the inference server's fault: 502, as for any answer that
// cannot be translated. It returns the bound, which sizes Predict's buffer.
func checkBudget(outputs []tensor.Tensor, format tfjson.Format, batch, maxBytes int64) (int64, error) {
	bound, footprint := sizeBound(outputs, format, batch)
	budget := satAdd(satMul(maxExpansion, footprint), minBudget)
	if maxBytes > 0 && maxBytes < budget {
		budget = maxBytes
	}
	if bound <= budget {
		return bound, nil
	}
	return 0, apierr.Errorf(apierr.BadGateway,
		"invalid response from inference server: its outputs would expand to a JSON body of up to %d bytes from %d bytes of tensor data (limit %d)",
		bound, footprint, budget)
}

// sizeBound returns an upper bound of the length of Predict's body and
// the outputs' footprint (their data, strings with a 4-byte length each,
// names and shapes), in O(outputs × rank + strings) without writing.
//
// The bound follows the writer (jsontext.Writer): every value, key and
// closing bracket is preceded by at most a separator, a newline and the
// indentation of its depth, which is below rank + 4 in both layouts;
// inside the rows of row format, arrays are single-line (", " only) and
// only objects break lines. Keys sit at depth 3 at most.
func sizeBound(outputs []tensor.Tensor, format tfjson.Format, batch int64) (bound, footprint int64) {
	maxRank := 0
	for i := range outputs {
		maxRank = max(maxRank, len(outputs[i].Shape))
	}
	line := int64(2 + 4*(maxRank+4)) // ",\n" + indentation
	bound = 64                       // {"predictions": [ ... ]} / {"outputs": ...}
	multi := len(outputs) > 1
	for i := range outputs {
		t := &outputs[i]
		footprint = satAdd(footprint, int64(len(t.Data)+len(t.Name)+8*len(t.Shape)))
		key := escapedLen(t.Name) + 2 + (2 + 4*3) // prefix, quoted name, ": "
		if multi {
			keys := int64(1)
			if format == tfjson.Row && batch > 0 {
				keys = batch // the name is printed in every row's object
			}
			bound = satAdd(bound, satMul(keys, key))
		}
		bound = satAdd(bound, tensorBound(t, format, line, &footprint))
	}
	if multi && format == tfjson.Row && batch > 0 {
		bound = satAdd(bound, satMul(batch, 2+2*(2+4*2))) // each row's braces at depth 2
	}
	return bound, footprint
}

// tensorBound bounds the text of t's values and brackets, adding its
// strings to footprint. line bounds a line break with indentation.
func tensorBound(t *tensor.Tensor, format tfjson.Format, line int64, footprint *int64) int64 {
	sep := line // what may precede a value or bracket
	if format == tfjson.Row {
		sep = 2 // ", " or ": " in single-line rows
	}
	// Arrays: one per element of every prefix of the shape (the whole
	// tensor, then each row, ...), fewer in row format; a zero dimension
	// ends the count, since its arrays are empty.
	arrays, prefix := int64(0), int64(1)
	for _, d := range t.Shape {
		arrays = satAdd(arrays, prefix)
		prefix = satMul(prefix, d)
	}
	b := satMul(arrays, 2+2*sep) // "[" and "]", each after a prefix
	if t.DataType != tensor.Bytes {
		n := prefix // the element count; sortedOutputs checked it against Data
		return satAdd(b, satMul(n, valueWidth(t.DataType)+sep))
	}
	b64 := isBytes(t)
	for _, s := range t.Strings {
		*footprint = satAdd(*footprint, int64(4+len(s)))
		w := int64(6*len(s)+2) + sep // worst-case escaping: \u00XX per byte
		if b64 {
			// {"b64": "<base64>"}: braces and key, each after a prefix;
			// objects break lines even in single-line rows.
			w = int64((len(s)+2)/3*4+2) + 9 + sep + 2*line
		}
		b = satAdd(b, w)
	}
	return b
}

// escapedLen is the length of s as a JSON string written by
// jsontext.AppendString (quotes included).
func escapedLen(s string) int64 {
	n := int64(len(s) + 2)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\b' || c == '\t' || c == '\n' || c == '\f' || c == '\r':
			n++
		case c < 0x20:
			n += 5
		}
	}
	return n
}

// valueWidth is the longest text of one value of d ("-1.17549435e-38",
// "-2.2250738585072014e-308", "-9223372036854775808", "false", ...).
func valueWidth(d tensor.DataType) int64 {
	switch d {
	case tensor.FP32, tensor.FP16, tensor.BF16:
		return 15
	case tensor.FP64:
		return 24
	case tensor.Int64, tensor.Uint64:
		return 20
	case tensor.Int32, tensor.Uint32:
		return 11
	case tensor.Int16, tensor.Uint16:
		return 6
	case tensor.Bool:
		return 5
	}
	return 4 // INT8, UINT8; an unwritable type prints no value at all
}

// satAdd and satMul are int64 arithmetic that saturates instead of
// wrapping, for bounds over shapes that may be absurd.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}
