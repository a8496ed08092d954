package tfresponse

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Classify appends TF Serving's classify response body to dst: the checks
// of PostProcessClassificationResult on the "classes" and "scores" output
// tensors (either may be nil: the signature lacks it), then
// MakeJsonFromClassificationResult (docs/tfserving-rest.md §5.3, §6.2):
// {"results": [[[label, score], …] per example]}, one single-line array
// per example, label "" without classes, score 0.0 without scores.
//
// Errors are *apierr.Error with TF Serving's texts (400): classes or
// scores not of rank 2, classes not BYTES, scores not FP32, a batch size
// other than numExamples, class and score counts that differ, and no
// example at all. On error dst is returned unchanged.
func Classify(dst []byte, classes, scores *tensor.Tensor, numExamples int) ([]byte, error) {
	var outputs []tensor.Tensor
	ci, si := -1, -1
	for _, t := range []*tensor.Tensor{classes, scores} {
		if t != nil {
			outputs = append(outputs, *t)
		}
	}
	if classes != nil {
		ci = 0
	}
	if scores != nil {
		si = len(outputs) - 1
	}
	return appendBody(dst)(NewClassify(outputs, ci, si, numExamples))
}

// appendBody returns a function appending a checked body to dst, or
// passing on its constructor's error.
func appendBody(dst []byte) func(*Body, error) ([]byte, error) {
	return func(b *Body, err error) ([]byte, error) {
		if err != nil {
			return dst, err
		}
		defer b.Release()
		return b.AppendTo(dst), nil
	}
}

// NewClassify makes Classify's checks on outputs[classes] and
// outputs[scores] (-1: the signature lacks it) and returns the Body that
// writes the classify body, example by example as the scores arrive.
func NewClassify(outputs []tensor.Tensor, classes, scores int, numExamples int) (*Body, error) {
	var ct, st *tensor.Tensor
	if classes >= 0 {
		ct = &outputs[classes]
	}
	if scores >= 0 {
		st = &outputs[scores]
	}
	if err := checkClassOutput(ct, "classes", tensor.Bytes, numExamples); err != nil {
		return nil, err
	}
	if err := checkClassOutput(st, "scores", tensor.FP32, numExamples); err != nil {
		return nil, err
	}
	numClasses := int64(0)
	switch {
	case ct != nil && st != nil:
		if ct.Shape[1] != st.Shape[1] {
			return nil, apierr.InvalidArgumentf("Tensors class and score should match in dim_size(1). Got %d vs. %d", ct.Shape[1], st.Shape[1])
		}
		numClasses = ct.Shape[1]
	case ct != nil:
		numClasses = ct.Shape[1]
	case st != nil:
		numClasses = st.Shape[1]
	}
	if numExamples == 0 {
		return nil, apierr.InvalidArgumentf("Cannot convert empty ClassificationResults to JSON")
	}
	for _, t := range []*tensor.Tensor{ct, st} {
		if t != nil {
			if err := t.Validate(); err != nil {
				return nil, apierr.Wrap(apierr.Internal, err, "Failed to write JSON value for tensor: "+t.Name)
			}
		}
	}
	walk := &classifyWalk{classes: classes, scores: scores, k: int(numClasses), n: numExamples}
	return newBody(scratchPool.Get().(*scratch), outputs, walk, 0), nil
}

// classifyWalk writes a classify body, resumably: the position is the
// example.
type classifyWalk struct {
	classes, scores int // output indexes, -1 for none
	k, n            int // classes per example, examples
	stage           int // 0: nothing written, 1: examples, 2: done
	i               int // next example
}

func (c *classifyWalk) step(b *Body, limit int) bool {
	w := b.sc.w
	if c.stage == 0 {
		w.StartObject()
		w.Key("results")
		w.StartArray()
		c.stage = 1
	}
	for ; c.i < c.n; c.i++ {
		if len(w.Bytes()) >= limit || (c.scores >= 0 && b.avail[c.scores] < int64((c.i+1)*c.k)) {
			return false
		}
		w.SetSingleLine(true)
		w.StartArray()
		for j := c.i * c.k; j < (c.i+1)*c.k; j++ {
			w.StartArray()
			if c.classes >= 0 {
				w.StringBytes(b.outputs[c.classes].Strings[j])
			} else {
				w.String("")
			}
			var score float32
			if c.scores >= 0 {
				score = math.Float32frombits(binary.LittleEndian.Uint32(b.outputs[c.scores].Data[4*j:]))
			}
			w.Float32(score)
			w.EndArray()
		}
		w.EndArray()
		w.SetSingleLine(false)
	}
	if c.stage == 1 {
		w.EndArray()
		w.EndObject()
		c.stage = 2
	}
	return true
}

// checkClassOutput is one output's part of PostProcessClassificationResult.
func checkClassOutput(t *tensor.Tensor, name string, want tensor.DataType, numExamples int) error {
	if t == nil {
		return nil
	}
	if len(t.Shape) != 2 {
		return apierr.InvalidArgumentf("Expected Tensor shape: [batch_size num_classes] but got %s", shapeString(t.Shape))
	}
	if t.DataType != want {
		return apierr.InvalidArgumentf("Expected %s Tensor of %s. Got: %s", name, want.TFName(), t.DataType.TFName())
	}
	if t.Shape[0] != int64(numExamples) {
		return apierr.InvalidArgumentf("Expected %s output batch size of %d. Got: %d", name, numExamples, t.Shape[0])
	}
	return nil
}

// shapeString is TensorShape::DebugString: "[2,3]", "[]" for a scalar.
func shapeString(shape []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteByte(']')
	return b.String()
}
