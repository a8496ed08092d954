package tfresponse

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
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

// scratch is the per-call working state, pooled: the pretty writer, the
// buffer it writes into (copied out once at the end, so the caller's
// buffer grows exactly once), the output order and row offsets.
type scratch struct {
	w     *jsontext.Writer
	buf   []byte
	order []int
	off   []int
	b64   []byte
}

var scratchPool = sync.Pool{New: func() any { return &scratch{w: jsontext.NewWriter(nil)} }}

// Predict appends TF Serving's predict response body for outputs to dst
// (json_tensor.cc MakeJsonFromTensors, docs/tfserving-rest.md §5): {"predictions": [...]}
// with one element per batch row for tfrequest.Row, {"outputs": ...} with
// whole tensors for tfrequest.Columnar. A single output is written without
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
func Predict(dst []byte, outputs []tensor.Tensor, format tfrequest.Format) ([]byte, error) {
	return PredictWithin(dst, outputs, format, 0)
}

// PredictWithin is Predict with the body's size bound also capped at
// maxBytes (when positive): over it, a BadGateway error before anything
// is written.
func PredictWithin(dst []byte, outputs []tensor.Tensor, format tfrequest.Format, maxBytes int64) ([]byte, error) {
	if len(outputs) == 0 {
		return dst, apierr.InvalidArgumentf("Cannot convert empty tensor map to JSON")
	}
	if format != tfrequest.Row && format != tfrequest.Columnar {
		return dst, apierr.InvalidArgumentf("Invalid request format")
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	order, err := sc.sortedOutputs(outputs)
	if err != nil {
		return dst, err
	}
	batch := int64(-1)
	if format == tfrequest.Row {
		// MakeRowFormatJsonFromTensors checks every output before writing.
		for _, i := range order {
			t := &outputs[i]
			if len(t.Shape) == 0 {
				return dst, apierr.InvalidArgumentf("Tensor name: %s has no shape information ", t.Name)
			}
			if batch >= 0 && t.Shape[0] != batch {
				return dst, apierr.InvalidArgumentf("Tensor name: %s has inconsistent batch size: %d expecting: %d", t.Name, t.Shape[0], batch)
			}
			batch = t.Shape[0]
		}
	}
	// TF fails on an unwritable datatype when it writes the first value of
	// such a tensor, in output order; tensors without elements never fail.
	for _, i := range order {
		if t := &outputs[i]; !writable(t.DataType) && !empty(t.Shape) {
			return dst, apierr.InvalidArgumentf("Failed to write JSON value for tensor type: %s", t.DataType.TFShortName())
		}
	}
	bound, err := checkBudget(outputs, format, batch, maxBytes)
	if err != nil {
		return dst, err
	}

	// Start from half the bound: growing by append from a small buffer
	// allocates about five times the final size of a large body (Go grows
	// large slices by 1.25×), all of it live until the next collection,
	// while real bodies take a third to a half of the bound (it assumes the
	// longest value text and full escaping everywhere).
	if hint := bound / 2; int64(cap(sc.buf)) < hint {
		sc.buf = make([]byte, 0, hint)
	}
	w := sc.w
	w.Reset(sc.buf[:0])
	w.StartObject()
	multi := len(outputs) > 1
	if format == tfrequest.Row {
		w.Key("predictions")
		w.StartArray()
		sc.off = slices.Grow(sc.off[:0], len(outputs))[:len(outputs)]
		clear(sc.off)
		for range batch {
			if multi {
				w.StartObject()
			}
			w.SetSingleLine(true)
			for _, i := range order {
				t := &outputs[i]
				if multi {
					w.Key(t.Name)
				}
				sc.off[i] = sc.writeTensor(t, t.Shape[1:], sc.off[i], isBytes(t))
			}
			w.SetSingleLine(false)
			if multi {
				w.EndObject()
			}
		}
		w.EndArray()
	} else {
		w.Key("outputs")
		if multi {
			w.StartObject()
		}
		for _, i := range order {
			t := &outputs[i]
			if multi {
				w.Key(t.Name)
			}
			sc.writeTensor(t, t.Shape, 0, isBytes(t))
		}
		if multi {
			w.EndObject()
		}
	}
	w.EndObject()
	sc.buf = w.Bytes()
	if dst == nil && cap(sc.buf) > maxPooledBuffer {
		// A buffer too large for the pool is handed over when the body
		// fills two thirds of it or more, rather than copied (the copy
		// would double the exchange's peak), else copied out so that the
		// bound's slack is not held while the answer is sent.
		out := sc.buf
		sc.buf = nil
		if cap(out)-len(out) > len(out)/2 {
			out = append([]byte(nil), out...)
		}
		return out, nil
	}
	return append(dst, sc.buf...), nil
}

func (sc *scratch) release() {
	if cap(sc.buf) > maxPooledBuffer {
		sc.buf = nil
	}
	sc.w.Reset(nil)
	scratchPool.Put(sc)
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

func isBytes(t *tensor.Tensor) bool {
	return t.DataType == tensor.Bytes && strings.HasSuffix(t.Name, bytesSuffix)
}
