package translate

import (
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfexample"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// Pipeline is the translation of one TF Serving inference verb, chosen
// once from the request's route (For): its request side (a TF body into
// a v2 infer body, whole or, for predict, streamed) and its response side
// (a v2 infer response into the TF body, whole or streamed). The Exchange
// the request side returns is what the response side needs. A Pipeline is
// a value: copying it is cheap and it holds no state of its own.
type Pipeline struct {
	verb    route.Verb
	request requestFunc
	answer  answerFunc
	streams bool // the request side can read a body in chunks
}

// The pipelines, one per inference verb.
var (
	predict  = Pipeline{verb: route.Predict, request: predictRequest, answer: predictAnswer, streams: true}
	classify = Pipeline{verb: route.Classify, request: examplesRequest(tfexample.Classify), answer: classifyAnswer}
	regress  = Pipeline{verb: route.Regress, request: examplesRequest(tfexample.Regress), answer: regressAnswer}
)

// For returns the pipeline of an inference verb (predict, classify,
// regress); ok is false for the verbs whose bodies are not translated
// (status and metadata are GET reads, answered by tfresponse's writers).
func For(v route.Verb) (p Pipeline, ok bool) {
	switch v {
	case route.Predict:
		return predict, true
	case route.Classify:
		return classify, true
	case route.Regress:
		return regress, true
	}
	return Pipeline{}, false
}

// Verb returns the verb the pipeline translates.
func (p Pipeline) Verb() route.Verb { return p.verb }

// Request turns a whole TF Serving request body into a v2 infer body and
// the Exchange its response needs. Errors are *apierr.Error with TF
// Serving's text and status.
//
// Predict: tfrequest.Parse (TF's checks, order and messages, in one pass
// straight into the tensors; resolve supplies the signature), then batch
// adaptation (predictRequest), then oip.EncodeRequest.
//
// Classify and regress: tfexample.Parse (every request error, before the
// model is looked up, as TF Serving orders them), then resolve (unknown
// model or signature), then tfexample.CheckSignature (the model must be a
// classification or regression model), then the serialized examples as
// the BYTES input "inputs" of shape [N] (or [N,1], see
// tfexample.InputShape) through oip.EncodeRequest, binary or JSON per
// server kind.
func (p Pipeline) Request(tfBody []byte, resolve tfrequest.Resolver, opt RequestOptions) (V2Request, Exchange, error) {
	return p.request(tfBody, resolve, opt)
}

// Streams reports that NewRequestStream reads the verb's request bodies in
// chunks (predict); the other verbs' bodies are translated whole.
func (p Pipeline) Streams() bool { return p.streams }

// NewRequestStream starts translating one request body written in chunks
// (see RequestStream), or returns nil when the verb does not stream.
func (p Pipeline) NewRequestStream(resolve tfrequest.Resolver, opt RequestOptions) *RequestStream {
	if !p.streams {
		return nil
	}
	return newRequestStream(resolve, opt)
}

// Response turns a successful v2 infer response body into the TF Serving
// body the client expects: oip.DecodeResponse (headerLength is the
// Inference-Header-Content-Length value, -1 when the body is JSON only),
// then the verb's answer, at most lim.MaxOutputBytes when set.
//
// Predict: when ex.Unbatched, a leading dimension of 1 put back on every
// output (the request side dropped it for a model that does not batch, so
// row format still answers one prediction per instance), then
// tfresponse.NewPredict in the request's format.
//
// Classify and regress: tfresponse.NewClassify with the "classes" and
// "scores" outputs of the signature, or tfresponse.NewRegress with
// "outputs". An output the signature declares but the answer lacks is
// TF's error for a session that returned fewer tensors than asked.
//
// The returned body is a fresh slice: it does not alias v2Body. Errors are
// *apierr.Error: BadGateway for a v2 body that cannot be decoded, TF
// Serving's own texts for what TF Serving would reject after inference.
func (p Pipeline) Response(v2Body []byte, headerLength int, ex Exchange, lim tensor.Limits) ([]byte, error) {
	b, err := p.body(v2Body, headerLength, ex, lim)
	if err != nil {
		return nil, err
	}
	defer b.Release()
	return b.AppendTo(nil), nil
}

// body is the TF answer to a whole v2 answer, in the writer's pooled
// memory (Response copies it out, ResponseParts hands it over).
func (p Pipeline) body(v2Body []byte, headerLength int, ex Exchange, lim tensor.Limits) (*tfresponse.Body, error) {
	outputs, err := decodeOutputs(v2Body, headerLength, ex, lim)
	if err != nil {
		return nil, err
	}
	return p.answer(outputs, ex, lim)
}

// NewResponseStream returns a stream translating one v2 response body as
// it arrives (see ResponseStream). headerLength is the parsed
// inference-header-content-length, -1 for a JSON-only body; out receives
// the TF JSON in order, in pieces of at most tfresponse.PieceSize bytes
// (the slice may be reused after out returns; an out error stops the
// stream and is returned).
func (p Pipeline) NewResponseStream(headerLength int, ex Exchange, lim tensor.Limits, out func([]byte) error) *ResponseStream {
	return newResponseStream(headerLength, p.answer, ex, lim, out)
}
