package session

import (
	"context"

	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
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
	// response translates a whole successful v2 answer, handed over in
	// place: the caller releases it once written.
	response(body []byte, headerLength int, ex translate.Exchange, lim tensor.Limits) (translate.Answer, error)
	// responseStream returns the translator of a binary v2 answer that
	// arrives in pieces and leaves through out.
	responseStream(headerLength int, ex translate.Exchange, lim tensor.Limits, out func([]byte) error) *translate.ResponseStream
	// unknownSignature is TF Serving's error for a signature_name the
	// model does not have: the verbs word it differently.
	unknownSignature(name string) error
}

// The verbs' pipelines (package values: choosing one allocates nothing,
// since a pointer or a zero-size value goes into an interface as it is).
var (
	predictVerb  = &inferencePipeline{tp: translatorOf(route.Predict), wrongSignature: "Serving signature name: \"%s\" not found in signature def"}
	classifyVerb = &inferencePipeline{tp: translatorOf(route.Classify), wrongSignature: "No signature was found with the name: %s"}
	regressVerb  = &inferencePipeline{tp: translatorOf(route.Regress), wrongSignature: "No signature was found with the name: %s"}
	statusVerb   = statusPipeline{}
	metadataVerb = metadataPipeline{}
)

// translatorOf is translate's pipeline of an inference verb.
func translatorOf(v route.Verb) translate.Pipeline {
	tp, ok := translate.For(v)
	if !ok {
		panic("translate has no pipeline for " + v.String())
	}
	return tp
}

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

// inferencePipeline is POST …:predict, …:classify and …:regress: the
// bodies translated by translate's pipeline of the verb. Predict bodies are
// parsed as they stream; classify and regress bodies (serialized
// tf.Examples, small by nature) are gathered and translated whole.
type inferencePipeline struct {
	tp translate.Pipeline
	// wrongSignature is TF Serving's text for an unknown signature_name,
	// worded differently by predict and by classify/regress.
	wrongSignature string
}

func (p *inferencePipeline) start(ctx context.Context, s *Session, h HeaderGetter, eos bool) Action {
	return s.awaitBody(ctx, p, h, eos)
}

func (p *inferencePipeline) request(body []byte, resolve tfrequest.Resolver, opt translate.RequestOptions) (translate.V2Request, translate.Exchange, error) {
	return p.tp.Request(body, resolve, opt)
}

func (p *inferencePipeline) requestStream(resolve tfrequest.Resolver, opt translate.RequestOptions) *translate.RequestStream {
	return p.tp.NewRequestStream(resolve, opt)
}

func (p *inferencePipeline) response(body []byte, headerLength int, ex translate.Exchange, lim tensor.Limits) (translate.Answer, error) {
	return p.tp.ResponseParts(body, headerLength, ex, lim)
}

func (p *inferencePipeline) responseStream(headerLength int, ex translate.Exchange, lim tensor.Limits, out func([]byte) error) *translate.ResponseStream {
	return p.tp.NewResponseStream(headerLength, ex, lim, out)
}

func (p *inferencePipeline) unknownSignature(name string) error {
	return apierr.InvalidArgumentf(p.wrongSignature, name)
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
