package translate

import (
	"errors"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
	"github.com/tfsbridge/tfsbridge/translate/v2"
)

// TranslateResponse turns a successful v2 infer response body into the TF
// Serving predict body the client expects: v2.DecodeResponse (headerLength
// is the Inference-Header-Content-Length value, -1 when the body is JSON
// only), then, when ex.Unbatched, a leading dimension of 1 put back on
// every output (the request side dropped it for a model that does not
// batch, so row format still answers one prediction per instance), then
// tfresponse.Predict in the request's format.
//
// The returned body is a fresh slice: it does not alias v2Body. Errors are
// *apierr.Error: BadGateway for a v2 body that cannot be decoded, TF
// Serving's own texts for what TF Serving would reject after inference.
func TranslateResponse(v2Body []byte, headerLength int, ex Exchange, lim tensor.Limits) ([]byte, error) {
	outputs, err := v2.DecodeResponse(v2Body, headerLength, ex.Signature, lim)
	if err != nil {
		var e *apierr.Error
		if errors.As(err, &e) {
			return nil, err
		}
		return nil, apierr.Wrap(apierr.BadGateway, err, err.Error())
	}
	if ex.Unbatched {
		rebatch(outputs)
	}
	return tfresponse.Predict(nil, outputs, ex.Format)
}

// rebatch prepends a dimension of 1 to every output's shape, with one
// allocation for all of them; the tensors' own shape slices may alias the
// decoder's memory and are not written to.
func rebatch(outputs []tensor.Tensor) {
	total := 0
	for i := range outputs {
		total += len(outputs[i].Shape) + 1
	}
	dims := make([]int64, 0, total)
	for i := range outputs {
		start := len(dims)
		dims = append(dims, 1)
		dims = append(dims, outputs[i].Shape...)
		outputs[i].Shape = dims[start:len(dims):len(dims)]
	}
}
