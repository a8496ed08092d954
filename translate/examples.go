package translate

import (
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfexample"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
	"github.com/tfsbridge/tfsbridge/translate/v2"
)

// TranslateExamplesRequest turns a TF Serving :classify or :regress body
// into a v2 infer body for the model behind the signature: tfexample.Parse
// (every request error, before the model is looked up, as TF Serving
// orders them), then resolve (unknown model or signature), then
// tfexample.CheckSignature (the model must be a classification or
// regression model), then the serialized examples as the BYTES input
// "inputs" of shape [N] (or [N,1], see tfexample.InputShape) through
// v2.EncodeRequest, binary or JSON per server kind.
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
	body, hl, ct, err := v2.EncodeRequest(nil, inputs, v2.EncodeOptions{Kind: opt.Kind, ID: opt.ID})
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
	outputs, err := decodeOutputs(v2Body, headerLength, ex, lim)
	if err != nil {
		return nil, err
	}
	if m == tfexample.Regress {
		out := find(outputs, tfexample.OutputsName)
		if out == nil {
			return nil, apierr.InvalidArgumentf("Expected output_tensors and output_tensor_names to have the same size.")
		}
		return tfresponse.Regress(nil, out, ex.Examples)
	}
	var classes, scores *tensor.Tensor
	wanted, got := 0, 0
	for _, name := range []string{tfexample.ClassesName, tfexample.ScoresName} {
		if _, ok := ex.Signature.Output(name); !ok {
			continue
		}
		wanted++
		t := find(outputs, name)
		if t == nil {
			continue
		}
		got++
		if name == tfexample.ClassesName {
			classes = t
		} else {
			scores = t
		}
	}
	if got != wanted {
		return nil, apierr.InvalidArgumentf("Expected %d output tensor(s).  Got: %d", wanted, got)
	}
	return tfresponse.Classify(nil, classes, scores, ex.Examples)
}

// find returns the output named name, or nil.
func find(outputs []tensor.Tensor, name string) *tensor.Tensor {
	for i := range outputs {
		if outputs[i].Name == name {
			return &outputs[i]
		}
	}
	return nil
}
