package tfresponse

import (
	"encoding/binary"
	"math"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Regress appends TF Serving's regress response body to dst: the checks
// of PostProcessRegressionResult on the "outputs" tensor, then
// MakeJsonFromRegressionResult (docs/tfserving-rest.md §5.3, §6.2): {"results": [v, …]} on
// one line, values in TF's DT_FLOAT format.
//
// Errors are *apierr.Error with TF Serving's texts (400): a shape other
// than [N] or [N,1], a batch size other than numExamples, a datatype
// other than FP32, and no example at all. On error dst is returned
// unchanged.
func Regress(dst []byte, outputs *tensor.Tensor, numExamples int) ([]byte, error) {
	return appendBody(dst)(NewRegress([]tensor.Tensor{*outputs}, 0, numExamples))
}

// NewRegress makes Regress's checks on outputs[out] and returns the Body
// that writes the regress body, value by value as they arrive.
func NewRegress(outputs []tensor.Tensor, out int, numExamples int) (*Body, error) {
	t := &outputs[out]
	shape := t.Shape
	if !(len(shape) == 1 || (len(shape) == 2 && shape[1] == 1)) {
		return nil, apierr.InvalidArgumentf("Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got %s", shapeString(shape))
	}
	if int64(numExamples) != shape[0] {
		return nil, apierr.InvalidArgumentf("Input batch size did not match output batch size: %d vs. %d", numExamples, shape[0])
	}
	if t.DataType != tensor.FP32 {
		return nil, apierr.InvalidArgumentf("Expected output Tensor of DT_FLOAT.  Got: %s", t.DataType.TFName())
	}
	if err := t.Validate(); err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "Failed to write JSON value for tensor: "+t.Name)
	}
	if numExamples == 0 {
		return nil, apierr.InvalidArgumentf("Cannot convert empty RegressionResults to JSON")
	}
	walk := &regressWalk{out: out, n: numExamples}
	return newBody(scratchPool.Get().(*scratch), outputs, walk, 0), nil
}

// regressWalk writes a regress body ({"results": [v, …]} on one line),
// resumably: the position is the example.
type regressWalk struct {
	out, n int
	stage  int // 0: nothing written, 1: values, 2: done
	i      int // next example
}

func (r *regressWalk) step(b *Body, limit int) bool {
	w := b.sc.w
	if r.stage == 0 {
		w.StartObject()
		w.Key("results")
		w.SetSingleLine(true)
		w.StartArray()
		r.stage = 1
	}
	for ; r.i < r.n; r.i++ {
		if len(w.Bytes()) >= limit || b.avail[r.out] <= int64(r.i) {
			return false
		}
		w.Float32(math.Float32frombits(binary.LittleEndian.Uint32(b.outputs[r.out].Data[4*r.i:])))
	}
	if r.stage == 1 {
		w.EndArray()
		w.EndObject()
		r.stage = 2
	}
	return true
}
