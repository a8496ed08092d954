package translate

import (
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
	"github.com/tfsbridge/tfsbridge/translate/v2"
)

// RequestOptions configure TranslateRequest.
type RequestOptions struct {
	// Kind is the v2 server the body is for (binary extension or JSON).
	Kind v2.ServerKind
	// ID is the v2 request "id"; empty sends none.
	ID string
	// Limits bound what the TF body may make the parser build.
	Limits tensor.Limits
	// MaxBytes bounds the serialized tf.Examples of a classify or regress
	// request (tfexample.Options.MaxBytes); 0 means tfexample's default.
	MaxBytes int64
}

// TranslateRequest turns a TF Serving predict body into a v2 infer body:
// tfrequest.Parse (TF's checks, order and messages; resolve supplies the
// signature), then batch adaptation, then v2.EncodeRequest. The Exchange
// it returns is what TranslateResponse needs to answer in TF's format.
//
// Batch adaptation (docs/open-inference-protocol.md §9): row format always
// builds [len(instances)] + instance shape, as TF Serving does. A model
// that does not batch declares its inputs without a batch dimension; when
// such a model gets exactly one instance and every input's declared rank
// equals the instance rank, the leading 1 is dropped so the v2 server sees
// the declared shape, and Exchange.Unbatched tells the response side to
// put it back. Columnar tensors are sent exactly as written.
//
// Errors are *apierr.Error with TF Serving's text and status.
func TranslateRequest(tfBody []byte, resolve tfrequest.Resolver, opt RequestOptions) (V2Request, Exchange, error) {
	req, err := tfrequest.Parse(tfBody, resolve, opt.Limits)
	if err != nil {
		return V2Request{}, Exchange{}, err
	}
	// The tensors alias pooled memory; EncodeRequest copies them into the
	// body, after which the pool can have it back.
	defer req.Release()

	ex := Exchange{Format: req.Format, Signature: req.Signature}
	inputs := req.Inputs
	if unbatch(req) {
		for i := range inputs {
			inputs[i].Shape = inputs[i].Shape[1:]
		}
		ex.Unbatched = true
	}
	inputsToWire(req.Signature, inputs)
	body, hl, ct, err := v2.EncodeRequest(nil, inputs, v2.EncodeOptions{Kind: opt.Kind, ID: opt.ID})
	if err != nil {
		return V2Request{}, Exchange{}, err
	}
	return V2Request{Body: body, HeaderLength: hl, ContentType: ct}, ex, nil
}

// unbatch reports whether the leading batch dimension of 1 must be
// dropped: row format, a model that does not batch, one instance, and for
// every input a declared rank equal to the instance rank (all or nothing,
// since the response side restores one dimension for every output).
func unbatch(req *tfrequest.Request) bool {
	sig := req.Signature
	if req.Format != tfrequest.Row || sig == nil || sig.Batched || len(req.Inputs) == 0 {
		return false
	}
	for i := range req.Inputs {
		t := &req.Inputs[i]
		if len(t.Shape) == 0 || t.Shape[0] != 1 {
			return false
		}
		spec, ok := sig.Input(t.Name)
		if !ok || len(spec.Shape) != len(t.Shape)-1 {
			return false
		}
	}
	return true
}
