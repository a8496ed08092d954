package tfcompare

import (
	"encoding/binary"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/x448/float16"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// Predict is a successful predict answer given by its outputs, as
// tfresponse.NewPredict writes TF Serving's JSON from them in Format
// (the decoded v2 answer, batch dimension restored): what the client
// reads, before it is written.
type Predict struct {
	Outputs []tensor.Tensor
	Format  tfjson.Format
}

// ComparePredict is Compare of the TF JSON texts tfresponse writes for a
// and b, without writing or parsing them: each element is taken as the
// text carries it (printed as the writer prints it, read back as Compare's
// parser reads it: a float32 is the double its nine-digit text parses to,
// not the float32 itself), and the outputs are named, shaped and ordered
// as the parser finds them. The Result is Compare's, field for field, for
// every pair it accepts.
//
// ok is false, and there is no Result, for the pairs whose texts alone
// tell how they compare (call Compare on the texts then): outputs that
// differ in number, name, order, datatype or shape between a and b,
// formats that differ, no outputs, BYTES outputs (their escaping), outputs
// without elements (their empty arrays), duplicate names, what the writer
// refuses in row format (a scalar, unequal batch sizes), and texts the
// parser's Limits might refuse. A shadow's answer to the primary's own
// request mostly has the primary's outputs: only its values differ.
func (c *Comparer) ComparePredict(a, b Predict) (r *Result, ok bool) {
	if !c.samePredictForm(&a, &b) {
		return nil, false
	}
	r = &c.res
	outs := r.Outputs[:0]
	*r = Result{StatusA: http.StatusOK, StatusB: http.StatusOK}
	c.a.reset()
	c.b.reset()
	c.a.loadPredict(&a, c.order)
	c.b.loadPredict(&b, c.order)
	defer c.a.reset()
	defer c.b.reset()
	r.KindA, r.KindB = c.a.kind, c.b.kind
	c.compareOutputs(r, outs)
	return r, true
}

// samePredictForm reports a pair ComparePredict compares, with the
// outputs' order in the texts (by name) in c.order.
func (c *Comparer) samePredictForm(a, b *Predict) bool {
	n := len(a.Outputs)
	if n == 0 || len(b.Outputs) != n || a.Format != b.Format || (a.Format != tfjson.Row && a.Format != tfjson.Columnar) {
		return false
	}
	lim := c.Limits
	maxDepth := lim.MaxDepth
	if maxDepth <= 0 {
		maxDepth = jsontext.DefaultMaxDepth
	}
	// The text's values and keys, bounded: a key per row and output, an
	// array at every level (at most an element's worth each), the
	// elements, and the frame.
	nodes := int64(8)
	batch := int64(-1)
	for i := range a.Outputs {
		ta, tb := &a.Outputs[i], &b.Outputs[i]
		if ta.Name != tb.Name || ta.DataType != tb.DataType || !slices.Equal(ta.Shape, tb.Shape) {
			return false
		}
		if !leafType(ta.DataType) || len(ta.Shape)+4 > maxDepth {
			return false
		}
		elems, err := tensor.NumElements(ta.Shape)
		if err != nil || elems == 0 || ta.Validate() != nil || tb.Validate() != nil {
			return false
		}
		if a.Format == tfjson.Row {
			if len(ta.Shape) == 0 || (batch >= 0 && ta.Shape[0] != batch) {
				return false
			}
			batch = ta.Shape[0]
		}
		rank := int64(len(ta.Shape))
		if elems > (math.MaxInt32-nodes)/(rank+3) {
			return false
		}
		nodes += elems*(rank+2) + max(batch, 1) + 2
	}
	if lim.MaxValues > 0 && nodes > lim.MaxValues {
		return false
	}
	c.order = c.order[:0]
	for i := range n {
		c.order = append(c.order, i)
	}
	if n > 1 {
		outs := a.Outputs
		slices.SortFunc(c.order, func(x, y int) int { return strings.Compare(outs[x].Name, outs[y].Name) })
		for j := 1; j < n; j++ {
			if outs[c.order[j]].Name == outs[c.order[j-1]].Name {
				return false
			}
		}
	}
	return true
}

// leafType reports a datatype whose elements ComparePredict reads.
func leafType(d tensor.DataType) bool {
	return d.Valid() && d != tensor.Bytes
}

// loadPredict is load of p's TF text, order the outputs' order in it:
// {"predictions": ...} or {"outputs": ...}, a single output under that
// name, several under their own, each flattened row-major with the
// tensor's shape (what the parser makes of the nested arrays of an
// output with elements).
func (s *side) loadPredict(p *Predict, order []int) {
	s.status = http.StatusOK
	var single string
	s.kind, single = Predictions, "predictions"
	if p.Format == tfjson.Columnar {
		s.kind, single = Outputs, "outputs"
	}
	for _, i := range order {
		t := &p.Outputs[i]
		name := t.Name
		if len(order) == 1 {
			name = single
		}
		o := s.open(name)
		s.dims = append(s.dims, t.Shape...)
		s.tensorLeaves(o, t)
		s.close(o)
	}
}

// tensorLeaves appends t's elements as its text carries them: numbers
// printed as tfresponse prints them (jsontext's writer) and read back
// with the parser's number reader, booleans as true and false.
func (s *side) tensorLeaves(o *flatOut, t *tensor.Tensor) {
	d := t.Data
	n := t.Len()
	s.vals = slices.Grow(s.vals, n)
	var buf [40]byte
	switch t.DataType {
	case tensor.FP32:
		for i := range n {
			s.push(o, textLeaf(jsontext.AppendFloat32(buf[:0], math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:])))))
		}
	case tensor.FP64:
		for i := range n {
			s.push(o, textLeaf(jsontext.AppendFloat64(buf[:0], math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:])))))
		}
	case tensor.FP16:
		for i := range n {
			s.push(o, textLeaf(jsontext.AppendFloat32(buf[:0], float16.Frombits(binary.LittleEndian.Uint16(d[2*i:])).Float32())))
		}
	case tensor.BF16:
		for i := range n {
			s.push(o, textLeaf(jsontext.AppendFloat32(buf[:0], tensor.BF16ToFloat32(binary.LittleEndian.Uint16(d[2*i:])))))
		}
	case tensor.Uint64:
		for i := range n {
			s.push(o, textLeaf(strconv.AppendUint(buf[:0], binary.LittleEndian.Uint64(d[8*i:]), 10)))
		}
	case tensor.Bool:
		for i := range n {
			l := leaf{dt: Bool}
			if d[i] != 0 {
				l.f = 1
			}
			s.push(o, l)
		}
	default: // the integers that print as int64s: the parser's Int
		for i := range n {
			v := t.Int64At(i)
			s.push(o, leaf{dt: Int, i: v, f: float64(v)})
		}
	}
}

// textLeaf is the element a number's text holds, as the parser reads it.
func textLeaf(text []byte) leaf {
	n, _, ok := jsontext.ParseNumber(text, 0)
	if !ok {
		return leaf{dt: Mixed} // never: the writer's numbers parse
	}
	return numLeaf(n)
}
