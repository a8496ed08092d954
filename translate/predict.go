package translate

import (
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// predictRequest is the predict pipeline's request side over a whole
// body: tfrequest.Parse, then encodeRequest.
//
// Batch adaptation (docs/open-inference-protocol.md §9): row format always
// builds [len(instances)] + instance shape, as TF Serving does. A model
// that does not batch declares its inputs without a batch dimension; when
// such a model gets exactly one instance and every input's declared rank
// equals the instance rank, the leading 1 is dropped so the v2 server sees
// the declared shape, and Exchange.Unbatched tells the response side to
// put it back. Columnar tensors are sent exactly as written.
func predictRequest(tfBody []byte, resolve tfrequest.Resolver, opt RequestOptions) (V2Request, Exchange, error) {
	req, err := tfrequest.Parse(tfBody, resolve, opt.Limits)
	if err != nil {
		return V2Request{}, Exchange{}, err
	}
	return encodeRequest(req, opt)
}

// encodeRequest is the step after parsing: batch adaptation and the v2 body.
func encodeRequest(req *tfrequest.Request, opt RequestOptions) (V2Request, Exchange, error) {
	// The tensors alias pooled memory; EncodeRequest copies them into the
	// body, after which the pool can have it back.
	defer req.Release()
	ex := adaptBatch(req)
	body, hl, ct, err := oip.EncodeRequest(nil, req.Inputs, oip.EncodeOptions{Kind: opt.Kind, ID: opt.ID})
	if err != nil {
		return V2Request{}, Exchange{}, err
	}
	return V2Request{Body: body, HeaderLength: hl, ContentType: ct}, ex, nil
}

// encodeRequestParts is encodeRequest for a streamed Request: the body in
// parts that alias its data blocks (req.Blocks), so the V2Request owns req
// until Release. A JSON body (MLServer) is converted, not aliased: req is
// released at once.
func encodeRequestParts(req *tfrequest.Request, opt RequestOptions) (V2Request, Exchange, error) {
	ex := adaptBatch(req)
	parts, hl, ct, err := oip.EncodeRequestParts(req.Inputs, req.Blocks, oip.EncodeOptions{Kind: opt.Kind, ID: opt.ID})
	if err != nil {
		req.Release()
		return V2Request{}, Exchange{}, err
	}
	if hl < 0 {
		req.Release()
		return V2Request{Body: parts[0], HeaderLength: hl, ContentType: ct}, ex, nil
	}
	return V2Request{Parts: parts, HeaderLength: hl, ContentType: ct, owner: req}, ex, nil
}

// adaptBatch makes req's inputs what the v2 server is sent (batch
// adaptation, wire names) and returns the Exchange for the response side.
func adaptBatch(req *tfrequest.Request) Exchange {
	ex := Exchange{Format: req.Format, Signature: req.Signature}
	inputs := req.Inputs
	if unbatch(req) {
		for i := range inputs {
			inputs[i].Shape = inputs[i].Shape[1:]
		}
		ex.Unbatched = true
	}
	inputsToWire(req.Signature, inputs)
	return ex
}

// unbatch reports whether the leading batch dimension of 1 must be
// dropped: row format, a model that does not batch, one instance, and for
// every input a declared rank equal to the instance rank (all or nothing,
// since the response side restores one dimension for every output).
func unbatch(req *tfrequest.Request) bool {
	sig := req.Signature
	if req.Format != tfjson.Row || sig == nil || sig.Batched || len(req.Inputs) == 0 {
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

// predictAnswer is the predict pipeline's response side after decoding:
// when ex.Unbatched, a leading dimension of 1 put back on every output,
// then tfresponse.NewPredict in the request's format.
func predictAnswer(outputs []tensor.Tensor, ex Exchange, lim tensor.Limits) (*tfresponse.Body, error) {
	if ex.Unbatched {
		rebatch(outputs)
	}
	return tfresponse.NewPredict(outputs, ex.Format, lim.MaxOutputBytes)
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
