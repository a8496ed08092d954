package translate

import (
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfexample"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// examplesRequest returns the request side of the classify (m
// tfexample.Classify) or regress pipeline: see Pipeline.Request.
func examplesRequest(m tfexample.Method) requestFunc {
	return func(tfBody []byte, resolve tfrequest.Resolver, opt RequestOptions) (V2Request, Exchange, error) {
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
}

// classifyAnswer is the classify pipeline's response side after
// decoding: the "classes" and "scores" outputs the signature declares,
// each of which the answer must hold, through tfresponse.NewClassify.
func classifyAnswer(outputs []tensor.Tensor, ex Exchange, _ tensor.Limits) (*tfresponse.Body, error) {
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

// regressAnswer is the regress pipeline's response side after decoding:
// the "outputs" output through tfresponse.NewRegress.
func regressAnswer(outputs []tensor.Tensor, ex Exchange, _ tensor.Limits) (*tfresponse.Body, error) {
	out := find(outputs, tfexample.OutputsName)
	if out < 0 {
		return nil, apierr.InvalidArgumentf("Expected output_tensors and output_tensor_names to have the same size.")
	}
	return tfresponse.NewRegress(outputs, out, ex.Examples)
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
