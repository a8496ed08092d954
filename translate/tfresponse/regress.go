package tfresponse

import (
	"encoding/binary"
	"math"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
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
	shape := outputs.Shape
	if !(len(shape) == 1 || (len(shape) == 2 && shape[1] == 1)) {
		return dst, apierr.InvalidArgumentf("Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got %s", shapeString(shape))
	}
	if int64(numExamples) != shape[0] {
		return dst, apierr.InvalidArgumentf("Input batch size did not match output batch size: %d vs. %d", numExamples, shape[0])
	}
	if outputs.DataType != tensor.FP32 {
		return dst, apierr.InvalidArgumentf("Expected output Tensor of DT_FLOAT.  Got: %s", outputs.DataType.TFName())
	}
	if err := outputs.Validate(); err != nil {
		return dst, apierr.Wrap(apierr.Internal, err, "Failed to write JSON value for tensor: "+outputs.Name)
	}
	if numExamples == 0 {
		return dst, apierr.InvalidArgumentf("Cannot convert empty RegressionResults to JSON")
	}
	return writeResults(dst, func(w *jsontext.Writer) {
		w.SetSingleLine(true)
		w.StartArray()
		for i := range numExamples {
			w.Float32(math.Float32frombits(binary.LittleEndian.Uint32(outputs.Data[4*i:])))
		}
		w.EndArray()
	}), nil
}
