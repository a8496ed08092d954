package tfresponse

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
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
	if err := checkClassOutput(classes, "classes", tensor.Bytes, numExamples); err != nil {
		return dst, err
	}
	if err := checkClassOutput(scores, "scores", tensor.FP32, numExamples); err != nil {
		return dst, err
	}
	numClasses := int64(0)
	switch {
	case classes != nil && scores != nil:
		if classes.Shape[1] != scores.Shape[1] {
			return dst, apierr.InvalidArgumentf("Tensors class and score should match in dim_size(1). Got %d vs. %d", classes.Shape[1], scores.Shape[1])
		}
		numClasses = classes.Shape[1]
	case classes != nil:
		numClasses = classes.Shape[1]
	case scores != nil:
		numClasses = scores.Shape[1]
	}
	if numExamples == 0 {
		return dst, apierr.InvalidArgumentf("Cannot convert empty ClassificationResults to JSON")
	}
	for _, t := range []*tensor.Tensor{classes, scores} {
		if t != nil {
			if err := t.Validate(); err != nil {
				return dst, apierr.Wrap(apierr.Internal, err, "Failed to write JSON value for tensor: "+t.Name)
			}
		}
	}
	k := int(numClasses)
	return writeResults(dst, func(w *jsontext.Writer) {
		w.StartArray()
		for i := range numExamples {
			w.SetSingleLine(true)
			w.StartArray()
			for c := range k {
				w.StartArray()
				if classes != nil {
					w.StringBytes(classes.Strings[i*k+c])
				} else {
					w.String("")
				}
				var score float32
				if scores != nil {
					score = math.Float32frombits(binary.LittleEndian.Uint32(scores.Data[4*(i*k+c):]))
				}
				w.Float32(score)
				w.EndArray()
			}
			w.EndArray()
			w.SetSingleLine(false)
		}
		w.EndArray()
	}), nil
}

// writeResults appends {"results": …} to dst, the value written by body
// with the pooled pretty writer. The key is "results" for both verbs (the
// REST docs say "result"; the code says "results").
func writeResults(dst []byte, body func(w *jsontext.Writer)) []byte {
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	w := sc.w
	w.Reset(sc.buf[:0])
	w.StartObject()
	w.Key("results")
	body(w)
	w.EndObject()
	sc.buf = w.Bytes()
	return append(dst, sc.buf...)
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
