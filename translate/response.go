package translate

import (
	"errors"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfexample"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// TranslateResponse turns a successful v2 infer response body into the TF
// Serving predict body the client expects, at most lim.MaxOutputBytes
// when set: oip.DecodeResponse (headerLength
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
	return translateWhole(v2Body, headerLength, 0, ex, lim)
}

// translateWhole is TranslateResponse (m 0) and TranslateExamplesResponse:
// the outputs decoded, checked by checkedBody, written whole.
func translateWhole(v2Body []byte, headerLength int, m tfexample.Method, ex Exchange, lim tensor.Limits) ([]byte, error) {
	outputs, err := decodeOutputs(v2Body, headerLength, ex, lim)
	if err != nil {
		return nil, err
	}
	b, err := checkedBody(outputs, m, ex, lim)
	if err != nil {
		return nil, err
	}
	defer b.Release()
	return b.AppendTo(nil), nil
}

// checkedBody makes TF Serving's checks of what inference returned and
// returns the Body that writes the answer: for predict (m 0), the outputs
// with, when ex.Unbatched, a leading dimension of 1 put back, through
// tfresponse.NewPredict in the request's format; for classify and regress,
// see TranslateExamplesResponse. The decoded outputs' data may still be
// arriving (ResponseStream).
func checkedBody(outputs []tensor.Tensor, m tfexample.Method, ex Exchange, lim tensor.Limits) (*tfresponse.Body, error) {
	if m == 0 {
		if ex.Unbatched {
			rebatch(outputs)
		}
		return tfresponse.NewPredict(outputs, ex.Format, lim.MaxOutputBytes)
	}
	return examplesBody(outputs, m, ex)
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

// decodeOutputs is oip.DecodeResponse with every error an *apierr.Error
// (BadGateway unless the decoder said otherwise).
func decodeOutputs(v2Body []byte, headerLength int, ex Exchange, lim tensor.Limits) ([]tensor.Tensor, error) {
	outputs, err := oip.DecodeResponse(v2Body, headerLength, ex.Signature, lim)
	if err != nil {
		return nil, badGateway(err)
	}
	return outputs, nil
}

// badGateway returns err as an *apierr.Error: itself when it is one,
// else a BadGateway error with its text.
func badGateway(err error) error {
	var e *apierr.Error
	if errors.As(err, &e) {
		return err
	}
	return apierr.Wrap(apierr.BadGateway, err, err.Error())
}
