package translate

import (
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfexample"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// TranslateExamplesRequest turns a TF Serving :classify or :regress body
// into a v2 infer body for the model behind the signature: tfexample.Parse
// (every request error, before the model is looked up, as TF Serving
// orders them), then resolve (unknown model or signature), then
// tfexample.CheckSignature (the model must be a classification or
// regression model), then the serialized examples as the BYTES input
// "inputs" of shape [N] (or [N,1], see tfexample.InputShape) through
// oip.EncodeRequest, binary or JSON per server kind.
//
// Errors are *apierr.Error with TF Serving's text and status.
func TranslateExamplesRequest(tfBody []byte, m tfexample.Method, resolve tfrequest.Resolver, opt RequestOptions) (V2Request, Exchange, error) {
	req, err := tfexample.Parse(tfBody, tfexample.Options{Limits: opt.Limits, MaxBytes: opt.MaxBytes})
	if err != nil {
		return V2Request{}, Exchange{}, err
	}
	sig, err := resolve(req.SignatureName)
	if err != nil {
		return V2Request{}, Exchange{}, err
	}
	if err := tfexample.CheckSignature(sig, m); err != nil {
		return V2Request{}, Exchange{}, err
	}
	n := len(req.Examples)
	inputs := []tensor.Tensor{{
		Name:     tfexample.InputName,
		DataType: tensor.Bytes,
		Shape:    tfexample.InputShape(sig, n),
		Strings:  req.Examples,
	}}
	inputsToWire(sig, inputs)
	body, hl, ct, err := oip.EncodeRequest(nil, inputs, oip.EncodeOptions{Kind: opt.Kind, ID: opt.ID})
	if err != nil {
		return V2Request{}, Exchange{}, err
	}
	return V2Request{Body: body, HeaderLength: hl, ContentType: ct}, Exchange{Signature: sig, Examples: n}, nil
}

// TranslateExamplesResponse turns a successful v2 infer response to a
// request made by TranslateExamplesRequest into TF Serving's classify or
// regress body: the outputs decoded (as for predict), then
// tfresponse.Classify with the "classes" and "scores" outputs of the
// signature, or tfresponse.Regress with "outputs". An output the
// signature declares but the answer lacks is TF's error for a session
// that returned fewer tensors than asked.
func TranslateExamplesResponse(v2Body []byte, headerLength int, m tfexample.Method, ex Exchange, lim tensor.Limits) ([]byte, error) {
	return translateWhole(v2Body, headerLength, m, ex, lim)
}

// examplesBody is TranslateExamplesResponse's part after decoding: the
// outputs the signature names found, then tfresponse.NewClassify or
// NewRegress.
func examplesBody(outputs []tensor.Tensor, m tfexample.Method, ex Exchange) (*tfresponse.Body, error) {
	if m == tfexample.Regress {
		out := find(outputs, tfexample.OutputsName)
		if out < 0 {
			return nil, apierr.InvalidArgumentf("Expected output_tensors and output_tensor_names to have the same size.")
		}
		return tfresponse.NewRegress(outputs, out, ex.Examples)
	}
	classes, scores := -1, -1
	wanted, got := 0, 0
	for _, name := range []string{tfexample.ClassesName, tfexample.ScoresName} {
		if _, ok := ex.Signature.Output(name); !ok {
			continue
		}
		wanted++
		i := find(outputs, name)
		if i < 0 {
			continue
		}
		got++
		if name == tfexample.ClassesName {
			classes = i
		} else {
			scores = i
		}
	}
	if got != wanted {
		return nil, apierr.InvalidArgumentf("Expected %d output tensor(s).  Got: %d", wanted, got)
	}
	return tfresponse.NewClassify(outputs, classes, scores, ex.Examples)
}

// find returns the index of the output named name, or -1.
func find(outputs []tensor.Tensor, name string) int {
	for i := range outputs {
		if outputs[i].Name == name {
			return i
		}
	}
	return -1
}
