package tfresponse

import (
	"encoding/binary"
	"math"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// TF Serving's classify and regress answers, {"results": [...]}
// (MakeJsonFromClassificationResult, MakeJsonFromRegressionResult;
// docs/tfserving-rest.md §5.3, §6.2), after the checks of
// PostProcessClassificationResult and PostProcessRegressionResult. Both
// are written by one resumable walk, example by example as the data
// arrives; only what one example writes differs.

// NewClassify makes PostProcessClassificationResult's checks on
// outputs[classes] and outputs[scores] (-1: the signature lacks it) and
// returns the Body that writes {"results": [[[label, score], …] per
// example]}, one single-line array per example, label "" without
// classes, score 0.0 without scores.
//
// Errors are *apierr.Error with TF Serving's texts (400): classes or
// scores not of rank 2, classes not BYTES, scores not FP32, a batch size
// other than numExamples, class and score counts that differ, and no
// example at all.
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
	k := int64(0)
	for _, t := range []*tensor.Tensor{ct, st} {
		if t == nil {
			continue
		}
		if ct != nil && st != nil && ct.Shape[1] != st.Shape[1] {
			return nil, apierr.InvalidArgumentf("Tensors class and score should match in dim_size(1). Got %d vs. %d", ct.Shape[1], st.Shape[1])
		}
		k = t.Shape[1]
	}
	if numExamples == 0 {
		return nil, apierr.InvalidArgumentf("Cannot convert empty ClassificationResults to JSON")
	}
	if err := validate(ct, st); err != nil {
		return nil, err
	}
	return newResults(outputs, numExamples, classifyExample{classes: classes, scores: scores, k: int(k)}), nil
}

// NewRegress makes PostProcessRegressionResult's checks on outputs[out]
// and returns the Body that writes {"results": [v, …]} on one line,
// values in TF's DT_FLOAT format.
//
// Errors are *apierr.Error with TF Serving's texts (400): a shape other
// than [N] or [N,1], a batch size other than numExamples, a datatype
// other than FP32, and no example at all.
func NewRegress(outputs []tensor.Tensor, out int, numExamples int) (*Body, error) {
	t := &outputs[out]
	shape := t.Shape
	if !(len(shape) == 1 || (len(shape) == 2 && shape[1] == 1)) {
		return nil, apierr.InvalidArgumentf("Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got %s", tensor.ShapeString(shape))
	}
	if int64(numExamples) != shape[0] {
		return nil, apierr.InvalidArgumentf("Input batch size did not match output batch size: %d vs. %d", numExamples, shape[0])
	}
	if t.DataType != tensor.FP32 {
		return nil, apierr.InvalidArgumentf("Expected output Tensor of DT_FLOAT.  Got: %s", t.DataType.TFName())
	}
	if err := validate(t); err != nil {
		return nil, err
	}
	if numExamples == 0 {
		return nil, apierr.InvalidArgumentf("Cannot convert empty RegressionResults to JSON")
	}
	return newResults(outputs, numExamples, regressExample{out: out}), nil
}

// validate is the Internal error for an output that is not well formed.
func validate(ts ...*tensor.Tensor) error {
	for _, t := range ts {
		if t == nil {
			continue
		}
		if err := t.Validate(); err != nil {
			return apierr.Wrap(apierr.Internal, err, "Failed to write JSON value for tensor: "+t.Name)
		}
	}
	return nil
}

// example is what one verb writes per example.
type example interface {
	// ready reports that example i's data is in place.
	ready(b *Body, i int) bool
	// write writes example i.
	write(b *Body, w *jsontext.Writer, i int)
	// oneLine reports a "results" list written on one line (regress);
	// otherwise each example is a single-line array on its own line.
	oneLine() bool
}

// resultsWalk writes {"results": [...]}, resumably: the position is the
// example.
type resultsWalk struct {
	ex    example
	n     int // examples
	stage int // 0: nothing written, 1: examples, 2: done
	i     int // next example
}

func newResults(outputs []tensor.Tensor, n int, ex example) *Body {
	return newBody(scratchPool.Get().(*scratch), outputs, &resultsWalk{ex: ex, n: n}, 0)
}

func (r *resultsWalk) step(b *Body, limit int) bool {
	w := b.sc.w
	if r.stage == 0 {
		w.StartObject()
		w.Key("results")
		w.SetSingleLine(r.ex.oneLine())
		w.StartArray()
		r.stage = 1
	}
	for ; r.i < r.n; r.i++ {
		if len(w.Bytes()) >= limit || !r.ex.ready(b, r.i) {
			return false
		}
		r.ex.write(b, w, r.i)
	}
	if r.stage == 1 {
		w.EndArray()
		w.EndObject()
		r.stage = 2
	}
	return true
}

// classifyExample writes one example's [[label, score], …].
type classifyExample struct {
	classes, scores int // output indexes, -1 for none
	k               int // classes per example
}

func (c classifyExample) oneLine() bool { return false }

func (c classifyExample) ready(b *Body, i int) bool {
	return c.scores < 0 || b.avail[c.scores] >= int64((i+1)*c.k)
}

func (c classifyExample) write(b *Body, w *jsontext.Writer, i int) {
	w.SetSingleLine(true)
	w.StartArray()
	for j := i * c.k; j < (i+1)*c.k; j++ {
		w.StartArray()
		if c.classes >= 0 {
			w.StringBytes(b.outputs[c.classes].Strings[j])
		} else {
			w.String("")
		}
		var score float32
		if c.scores >= 0 {
			score = float32At(b.outputs[c.scores].Data, j)
		}
		w.Float32(score)
		w.EndArray()
	}
	w.EndArray()
	w.SetSingleLine(false)
}

// regressExample writes one example's value.
type regressExample struct{ out int }

func (r regressExample) oneLine() bool { return true }

func (r regressExample) ready(b *Body, i int) bool { return b.avail[r.out] > int64(i) }

func (r regressExample) write(b *Body, w *jsontext.Writer, i int) {
	w.Float32(float32At(b.outputs[r.out].Data, i))
}

// float32At is the j-th little-endian float32 of data.
func float32At(data []byte, j int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(data[4*j:]))
}

// checkClassOutput is one output's part of PostProcessClassificationResult.
func checkClassOutput(t *tensor.Tensor, name string, want tensor.DataType, numExamples int) error {
	if t == nil {
		return nil
	}
	if len(t.Shape) != 2 {
		return apierr.InvalidArgumentf("Expected Tensor shape: [batch_size num_classes] but got %s", tensor.ShapeString(t.Shape))
	}
	if t.DataType != want {
		return apierr.InvalidArgumentf("Expected %s Tensor of %s. Got: %s", name, want.TFName(), t.DataType.TFName())
	}
	if t.Shape[0] != int64(numExamples) {
		return apierr.InvalidArgumentf("Expected %s output batch size of %d. Got: %d", name, numExamples, t.Shape[0])
	}
	return nil
}
