package translate

import (
	"errors"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

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
