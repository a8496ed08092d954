package translate

import (
	"errors"

	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
)

// RequestOptions configure TranslateRequest.
type RequestOptions struct {
	// Kind is the v2 server the body is for (binary extension or JSON).
	Kind oip.ServerKind
	// ID is the v2 request "id"; empty sends none.
	ID string
	// Limits bound what the TF body may make the parser build.
	Limits tensor.Limits
	// MaxBytes bounds the serialized tf.Examples of a classify or regress
	// request (tfexample.Options.MaxBytes); 0 means tfexample's default.
	MaxBytes int64
	// ReplayBytes is how long a streamed body (RequestStream) may be and
	// still be kept as text, so that the few bodies a stream cannot decide
	// (tfrequest.ErrUndecided) are settled by a second look at the whole
	// text; above it the text is dropped as soon as it passes this size.
	// 0 means DefaultReplayBytes; negative keeps nothing.
	ReplayBytes int64
}

// DefaultReplayBytes is RequestOptions.ReplayBytes when it is 0: small
// bodies, where almost all client mistakes happen, keep the exact path.
const DefaultReplayBytes = 1 << 20

// replayBytes returns the effective ReplayBytes.
func (o RequestOptions) replayBytes() int64 {
	switch {
	case o.ReplayBytes == 0:
		return DefaultReplayBytes
	case o.ReplayBytes < 0:
		return 0
	}
	return o.ReplayBytes
}

// TranslateRequest turns a TF Serving predict body into a v2 infer body:
// tfrequest.Parse (TF's checks, order and messages, in one pass straight
// into the tensors; resolve supplies the signature), then batch adaptation, then oip.EncodeRequest. The Exchange
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
	return encodeRequest(req, opt)
}

// RequestStream translates a predict body written in chunks of any size,
// never holding its text whole: Write each chunk, then Close. It answers
// as TranslateRequest over the whole body would.
//
// The decoder (tfrequest.NewDecoder, the one TranslateRequest runs over a
// whole body) reads the chunks and answers every body, TF Serving's status
// and text included, but for the few tfrequest.ErrUndecided lists. While
// the body is at most RequestOptions.ReplayBytes long a copy of its text
// is kept, and those few are answered by TranslateRequest over it; longer
// ones get a 400 saying so.
type RequestStream struct {
	dec     *tfrequest.Decoder
	resolve tfrequest.Resolver
	opt     RequestOptions
	replay  int64
	text    *[]byte // the body so far, while it is at most replay long
	n       int64   // bytes written
	decErr  error   // the decoder's sticky error
}

// NewRequestStream starts translating one streamed predict body.
func NewRequestStream(resolve tfrequest.Resolver, opt RequestOptions) *RequestStream {
	s := &RequestStream{dec: tfrequest.NewDecoder(resolve, opt.Limits), resolve: resolve, opt: opt, replay: opt.replayBytes()}
	if s.replay > 0 {
		s.text = getReplay()
	}
	return s
}

// Write feeds the next chunk; the caller may reuse it afterwards. An error
// is final: the body cannot succeed and Close will return the same error.
func (s *RequestStream) Write(chunk []byte) error {
	s.n += int64(len(chunk))
	if s.text != nil {
		if s.n <= s.replay {
			*s.text = append(*s.text, chunk...)
		} else {
			s.dropText()
		}
	}
	if s.decErr == nil {
		s.decErr = s.dec.Write(chunk)
	}
	if s.decErr != nil && (s.text == nil || !errors.Is(s.decErr, tfrequest.ErrUndecided)) {
		return s.decErr
	}
	return nil
}

// Close ends the body and returns what TranslateRequest would, the same
// bytes, in Parts for the binary extension (Triton, KServe): the header,
// then the tensor data as the decoder stored it, never copied. The caller
// calls Release on the V2Request once the body is sent.
func (s *RequestStream) Close() (V2Request, Exchange, error) {
	defer s.dropText()
	// Close also releases what a decoder that failed in Write holds.
	req, err := s.dec.Close()
	if err == nil {
		return encodeRequestParts(req, s.opt)
	}
	if s.text != nil && errors.Is(err, tfrequest.ErrUndecided) {
		return TranslateRequest(*s.text, s.resolve, s.opt)
	}
	return V2Request{}, Exchange{}, err
}

// Abort ends a stream that will not be closed (the exchange failed or the
// client went away): its kept text and the decoder's pooled blocks go back
// at once instead of waiting for the collector. Nothing is resolved or
// built; the stream cannot be used afterwards.
func (s *RequestStream) Abort() {
	s.dropText()
	s.dec.Abort()
}

// dropText gives the kept text back.
func (s *RequestStream) dropText() {
	if s.text != nil {
		putReplay(s.text)
		s.text = nil
	}
}

// replayFree holds the text buffers of a few streamed bodies between
// requests, so keeping a body's first ReplayBytes costs a copy, not an
// allocation grown by doubling. Unlike a sync.Pool it survives garbage
// collections, which a busy proxy runs every few requests; it is small,
// so it pins at most a few MiB.
var replayFree = make(chan *[]byte, 4)

func getReplay() *[]byte {
	select {
	case b := <-replayFree:
		return b
	default:
		b := make([]byte, 0, 64<<10)
		return &b
	}
}

func putReplay(b *[]byte) {
	if cap(*b) > 2*DefaultReplayBytes {
		return // one unusual ReplayBytes must not pin its buffer
	}
	*b = (*b)[:0]
	select {
	case replayFree <- b:
	default:
	}
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
