package session

import (
	"context"

	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfexample"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
)

// A pipeline is one verb's way through the session, chosen once, at the
// request headers (pipelineFor). The session owns everything the verbs
// share — routing, limits, admission, the body path of chunks with an end
// flag, ending the exchange (complete) — and asks the pipeline only what
// differs: how the exchange starts and, for verbs with bodies, how each
// side is translated. A new verb (a gRPC PredictionService call, say) is
// one more pipeline, not another branch in the session.
//
// This file is the only one that calls the translators.
type pipeline interface {
	// start handles the request headers, the route resolved: a verb with
	// a body sets the exchange up for it (Session.awaitBody), the others
	// answer at once.
	start(ctx context.Context, s *Session, h HeaderGetter, endOfStream bool) Action
}

// bodyPipeline is the pipeline of a verb whose request and response
// bodies are translated: its request, stream and response sides.
type bodyPipeline interface {
	pipeline
	// request translates a whole TF request body.
	request(body []byte, resolve tfrequest.Resolver, opt translate.RequestOptions) (translate.V2Request, translate.Exchange, error)
	// requestStream returns the translator of a request body that arrives
	// in pieces, nil when the verb's bodies are gathered and translated
	// whole.
	requestStream(resolve tfrequest.Resolver, opt translate.RequestOptions) *translate.RequestStream
	// response translates a whole successful v2 answer.
	response(body []byte, headerLength int, ex translate.Exchange, lim tensor.Limits) ([]byte, error)
	// responseStream returns the translator of a binary v2 answer that
	// arrives in pieces and leaves through out.
	responseStream(headerLength int, ex translate.Exchange, lim tensor.Limits, out func([]byte) error) *translate.ResponseStream
	// unknownSignature is TF Serving's error for a signature_name the
	// model does not have: the verbs word it differently.
	unknownSignature(name string) error
}

// The verbs' pipelines (package values: choosing one allocates nothing).
var (
	predictVerb  = predictPipeline{}
	classifyVerb = &examplesPipeline{method: tfexample.Classify}
	regressVerb  = &examplesPipeline{method: tfexample.Regress}
	statusVerb   = statusPipeline{}
	metadataVerb = metadataPipeline{}
)

// pipelineFor returns the pipeline of a TF Serving verb, nil for none.
func pipelineFor(v route.Verb) pipeline {
	switch v {
	case route.Predict:
		return predictVerb
	case route.Classify:
		return classifyVerb
	case route.Regress:
		return regressVerb
	case route.Status:
		return statusVerb
	case route.Metadata:
		return metadataVerb
	}
	return nil
}

// predictPipeline is POST …:predict: TF tensors in JSON, parsed as they
// stream.
type predictPipeline struct{}

func (p predictPipeline) start(ctx context.Context, s *Session, h HeaderGetter, eos bool) Action {
	return s.awaitBody(ctx, p, h, eos)
}

func (predictPipeline) request(body []byte, resolve tfrequest.Resolver, opt translate.RequestOptions) (translate.V2Request, translate.Exchange, error) {
	return translate.TranslateRequest(body, resolve, opt)
}

func (predictPipeline) requestStream(resolve tfrequest.Resolver, opt translate.RequestOptions) *translate.RequestStream {
	return translate.NewRequestStream(resolve, opt)
}

func (predictPipeline) response(body []byte, headerLength int, ex translate.Exchange, lim tensor.Limits) ([]byte, error) {
	return translate.TranslateResponse(body, headerLength, ex, lim)
}

func (predictPipeline) responseStream(headerLength int, ex translate.Exchange, lim tensor.Limits, out func([]byte) error) *translate.ResponseStream {
	return translate.NewResponseStream(headerLength, 0, ex, lim, out)
}

func (predictPipeline) unknownSignature(name string) error {
	return apierr.InvalidArgumentf("Serving signature name: \"%s\" not found in signature def", name)
}

// examplesPipeline is POST …:classify and …:regress: serialized
// tf.Examples, small by nature, gathered and translated whole.
type examplesPipeline struct{ method tfexample.Method }

func (p *examplesPipeline) start(ctx context.Context, s *Session, h HeaderGetter, eos bool) Action {
	return s.awaitBody(ctx, p, h, eos)
}

func (p *examplesPipeline) request(body []byte, resolve tfrequest.Resolver, opt translate.RequestOptions) (translate.V2Request, translate.Exchange, error) {
	return translate.TranslateExamplesRequest(body, p.method, resolve, opt)
}

func (*examplesPipeline) requestStream(tfrequest.Resolver, translate.RequestOptions) *translate.RequestStream {
	return nil
}

func (p *examplesPipeline) response(body []byte, headerLength int, ex translate.Exchange, lim tensor.Limits) ([]byte, error) {
	return translate.TranslateExamplesResponse(body, headerLength, p.method, ex, lim)
}

func (p *examplesPipeline) responseStream(headerLength int, ex translate.Exchange, lim tensor.Limits, out func([]byte) error) *translate.ResponseStream {
	return translate.NewResponseStream(headerLength, p.method, ex, lim, out)
}

func (*examplesPipeline) unknownSignature(name string) error {
	return apierr.InvalidArgumentf("No signature was found with the name: %s", name)
}

// statusPipeline is GET …/models/m[/versions/N]: answered at the request
// headers (read.go).
type statusPipeline struct{}

func (statusPipeline) start(ctx context.Context, s *Session, _ HeaderGetter, _ bool) Action {
	return s.status(ctx)
}

// metadataPipeline is GET …/metadata: answered at the request headers
// (read.go).
type metadataPipeline struct{}

func (metadataPipeline) start(ctx context.Context, s *Session, _ HeaderGetter, _ bool) Action {
	return s.metadata(ctx)
}
