package tfresponse

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// bytesSuffix marks a DT_STRING output written as {"b64": ...}
// (json_tensor.cc IsNamedTensorBytes; case-sensitive).
const bytesSuffix = "_bytes"

// maxEmptyArrays bounds the "[]" a zero-element tensor may expand to: a
// shape like [1e12, 0] holds no data yet would print a trillion empty
// arrays. Real outputs never come close.
var maxEmptyArrays = tensor.DefaultLimits.MaxElements

// maxPooledBuffer is the largest scratch buffer kept for reuse, so one
// huge response does not pin its memory forever.
const maxPooledBuffer = 64 << 20

// scratch is the per-body working state, pooled: the pretty writer, the
// buffer it writes into, the output order, a base64 buffer, and the Body
// itself.
type scratch struct {
	w     *jsontext.Writer
	buf   []byte
	order []int
	b64   []byte
	// pieces is what Body.Pieces hands out: the written body, in place.
	pieces [1][]byte

	body    Body        // the Body using this scratch
	predict predictWalk // its walker, for a predict body
}

var scratchPool = sync.Pool{New: func() any { return &scratch{w: jsontext.NewWriter(nil)} }}

// Predict appends TF Serving's predict response body for outputs to dst
// (json_tensor.cc MakeJsonFromTensors, docs/tfserving-rest.md §5): {"predictions": [...]}
// with one element per batch row for tfjson.Row, {"outputs": ...} with
// whole tensors for tfjson.Columnar. A single output is written without
// its name; several are objects keyed by name in sorted order (TF's order
// is protobuf map order, random per process; sorted is the deterministic
// faithful choice).
//
// Values follow TF Serving's rules (floats as jsontext.AppendFloat32/64,
// integers full width, DT_STRING escaped or {"b64": ...} for names ending
// in "_bytes"), with tfsbridge's one departure (DESIGN): FP16 and BF16 are
// written like DT_FLOAT and UINT16 as an integer, where TF Serving fails.
//
// Errors are *apierr.Error with TF Serving's text (400): empty outputs, a
// rank-0 output or unequal batch sizes in row format, an unwritable
// datatype. Tensors that are not well formed (data not matching the
// shape, duplicate names, a zero-size shape that would print more than
// tensor.DefaultLimits.MaxElements empty arrays) are Internal errors: the
// decoder should never hand them over. Outputs whose body could exceed 128
// times their own bytes plus 1 MiB (empty dimensions after large ones,
// extreme ranks, long names repeated per row: see budget.go) are a
// BadGateway error, checked before anything is written, so that no v2
// answer can make Predict allocate without bound. On error dst is
// returned unchanged.
func Predict(dst []byte, outputs []tensor.Tensor, format tfjson.Format) ([]byte, error) {
	return PredictWithin(dst, outputs, format, 0)
}

// PredictWithin is Predict with the body's size bound also capped at
// maxBytes (when positive): over it, a BadGateway error before anything
// is written.
func PredictWithin(dst []byte, outputs []tensor.Tensor, format tfjson.Format, maxBytes int64) ([]byte, error) {
	b, err := NewPredict(outputs, format, maxBytes)
	if err != nil {
		return dst, err
	}
	defer b.Release()
	return b.AppendTo(dst), nil
}

// NewPredict makes every check PredictWithin makes and returns the Body
// that writes the predict body of outputs, for writing whole or in pieces
// as the outputs' data arrives (Body.Stream): {"predictions"} row by row
// and, within each row, output by output in name order; {"outputs"} output
// by output. Errors are PredictWithin's.
func NewPredict(outputs []tensor.Tensor, format tfjson.Format, maxBytes int64) (*Body, error) {
	if len(outputs) == 0 {
		return nil, apierr.InvalidArgumentf("Cannot convert empty tensor map to JSON")
	}
	if format != tfjson.Row && format != tfjson.Columnar {
		return nil, apierr.InvalidArgumentf("Invalid request format")
	}
	sc := scratchPool.Get().(*scratch)
	b, err := sc.newPredict(outputs, format, maxBytes)
	if err != nil {
		sc.release()
		return nil, err
	}
	return b, nil
}

func (sc *scratch) newPredict(outputs []tensor.Tensor, format tfjson.Format, maxBytes int64) (*Body, error) {
	order, err := sc.sortedOutputs(outputs)
	if err != nil {
		return nil, err
	}
	batch := int64(-1)
	if format == tfjson.Row {
		// MakeRowFormatJsonFromTensors checks every output before writing.
		for _, i := range order {
			t := &outputs[i]
			if len(t.Shape) == 0 {
				return nil, apierr.InvalidArgumentf("Tensor name: %s has no shape information ", t.Name)
			}
			if batch >= 0 && t.Shape[0] != batch {
				return nil, apierr.InvalidArgumentf("Tensor name: %s has inconsistent batch size: %d expecting: %d", t.Name, t.Shape[0], batch)
			}
			batch = t.Shape[0]
		}
	}
	// TF fails on an unwritable datatype when it writes the first value of
	// such a tensor, in output order; tensors without elements never fail.
	for _, i := range order {
		if t := &outputs[i]; !writable(t.DataType) && !empty(t.Shape) {
			return nil, apierr.InvalidArgumentf("Failed to write JSON value for tensor type: %s", t.DataType.TFShortName())
		}
	}
	bound, err := checkBudget(outputs, format, batch, maxBytes)
	if err != nil {
		return nil, err
	}
	walk := &sc.predict
	*walk = predictWalk{order: order, row: format == tfjson.Row, batch: batch, multi: len(outputs) > 1, cur: cursor{nest: walk.cur.nest}}
	walk.cur.nest.Reset()
	return newBody(sc, outputs, walk, bound), nil
}

// predictWalk writes a predict body (json_tensor.cc
// MakeRowFormatJsonFromTensors, MakeColumnarFormatJsonFromTensors),
// resumably: the position is the row (row format), the output in name
// order, and the place within that output's value.
type predictWalk struct {
	order []int
	row   bool
	batch int64
	multi bool

	stage int // 0: nothing written, 1: writing values, 2: done
	r     int64
	oi    int
	cur   cursor
}

func (p *predictWalk) step(b *Body, limit int) bool {
	sc, w := b.sc, b.sc.w
	if p.stage == 0 {
		w.StartObject()
		if p.row {
			w.Key("predictions")
			w.StartArray()
		} else {
			w.Key("outputs")
			if p.multi {
				w.StartObject()
			}
		}
		p.stage = 1
	}
	for p.stage == 1 {
		if !p.cur.active {
			switch {
			case p.row && p.r == p.batch:
				w.EndArray()
				w.EndObject()
				p.stage = 2
				continue
			case p.row && p.oi == 0:
				if p.multi {
					w.StartObject()
				}
				w.SetSingleLine(true)
			case !p.row && p.oi == len(p.order):
				if p.multi {
					w.EndObject()
				}
				w.EndObject()
				p.stage = 2
				continue
			}
			t := &b.outputs[p.order[p.oi]]
			if p.multi {
				w.Key(t.Name)
			}
			if p.row {
				p.cur.start(t, t.Shape[1:], p.r)
			} else {
				p.cur.start(t, t.Shape, 0)
			}
		}
		if !sc.advance(&p.cur, b.avail[p.order[p.oi]], limit) {
			return false
		}
		p.oi++
		if p.row && p.oi == len(p.order) {
			w.SetSingleLine(false)
			if p.multi {
				w.EndObject()
			}
			p.oi = 0
			p.r++
		}
	}
	return true
}

// sortedOutputs returns the indexes of outputs in name order after
// checking that every output is a well-formed tensor with a unique name.
// Those failures mean the decoder handed over something no v2 server
// could have meant, so they are internal errors, not TF texts.
func (sc *scratch) sortedOutputs(outputs []tensor.Tensor) ([]int, error) {
	sc.order = sc.order[:0]
	for i := range outputs {
		t := &outputs[i]
		if err := checkTensor(t); err != nil {
			return nil, apierr.Wrap(apierr.Internal, err, "Failed to write JSON value for tensor: "+t.Name)
		}
		sc.order = append(sc.order, i)
	}
	slices.SortFunc(sc.order, func(a, b int) int { return strings.Compare(outputs[a].Name, outputs[b].Name) })
	for j := 1; j < len(sc.order); j++ {
		if name := outputs[sc.order[j]].Name; name == outputs[sc.order[j-1]].Name {
			return nil, apierr.Errorf(apierr.Internal, "Duplicate output tensor: %s", name)
		}
	}
	return sc.order, nil
}

// checkTensor checks that t holds exactly the elements its shape says
// (for datatypes that can be written), and that a tensor without elements
// would not expand into an unbounded number of empty arrays.
func checkTensor(t *tensor.Tensor) error {
	n, err := tensor.NumElements(t.Shape)
	if err != nil {
		return err
	}
	if writable(t.DataType) {
		if err := t.Validate(); err != nil {
			return err
		}
	}
	if n == 0 {
		arrays := int64(1)
		for _, d := range t.Shape {
			if d == 0 {
				break
			}
			arrays *= d // no overflow: bounded below before it can grow further
			if arrays > maxEmptyArrays {
				return fmt.Errorf("%w: shape %v expands to too many empty arrays", tensor.ErrShape, t.Shape)
			}
		}
	}
	return nil
}

// writable reports whether Predict can write values of datatype d.
func writable(d tensor.DataType) bool { return d.Valid() }

// empty reports whether a (checked) shape has no elements.
func empty(shape []int64) bool { return slices.Contains(shape, 0) }
