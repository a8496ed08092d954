package translate

import (
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// Exchange is what the response side of one exchange needs to know about
// its request side. The per-request session keeps it between the two.
type Exchange struct {
	// Format is the request format, which decides the response format.
	Format tfjson.Format
	// Unbatched reports that the request's leading batch dimension of 1
	// was dropped because the model does not batch; the response side puts
	// it back so row-format output still has one prediction per instance.
	Unbatched bool
	// Signature is the model signature the request was parsed against.
	Signature *tensor.Signature
	// Examples is the number of tf.Examples a classify or regress request
	// sent, which its outputs' batch size must equal.
	Examples int
}

// V2Request is a translated request body ready to send upstream: Body in
// one piece (Pipeline.Request), or Parts in order (RequestStream, whose
// binary-extension bodies alias the streamed tensors instead of copying
// them). Chunks and Len read either; Release hands back the memory Parts
// alias once the body has been sent.
type V2Request struct {
	Body []byte
	// Parts is the body in order when it is not one Body: the JSON header,
	// then each input's binary block, mostly slices of the decoder's
	// pooled data blocks, valid until Release.
	Parts [][]byte
	// HeaderLength is the value for Inference-Header-Content-Length, or -1
	// when the body is JSON only and the header must not be sent.
	HeaderLength int
	// ContentType is the Content-Type to send with the body.
	ContentType string

	owner *tfrequest.Request // holds the memory Parts alias
}

// Len returns the body's length in bytes.
func (r *V2Request) Len() int {
	if r.Parts == nil {
		return len(r.Body)
	}
	n := 0
	for _, p := range r.Parts {
		n += len(p)
	}
	return n
}

// Chunks returns the body as consecutive pieces: Parts, or Body alone.
func (r *V2Request) Chunks() [][]byte {
	if r.Parts == nil {
		return [][]byte{r.Body}
	}
	return r.Parts
}

// Release returns the pooled memory the body aliases, to be reused by the
// next requests: call it only once nothing reads the body any more — after
// it has been written out, not merely handed to something that keeps the
// slices (the reverse proxy's upstream request reads them later). It may
// be called more than once, and on the zero value. Without it the memory
// is simply garbage collected.
func (r *V2Request) Release() {
	if r == nil {
		return
	}
	r.owner.Release()
	r.owner = nil
	r.Parts = nil
	r.Body = nil
}

// RequestOptions configure a pipeline's request side.
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
	// ReplayBytes is how long a streamed body (Pipeline.NewRequestStream)
	// may be and still be kept as text, so that the few bodies a stream
	// cannot decide (tfrequest.ErrUndecided) are settled by a second look
	// at the whole text; above it the text is dropped as soon as it passes
	// this size.
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

// answerFunc is a pipeline's response side after decoding: TF Serving's
// checks of what inference returned, and the Body that writes the answer.
// The outputs' data may still be arriving (ResponseStream).
type answerFunc func(outputs []tensor.Tensor, ex Exchange, lim tensor.Limits) (*tfresponse.Body, error)

// requestFunc is a pipeline's request side over a whole body.
type requestFunc func(tfBody []byte, resolve tfrequest.Resolver, opt RequestOptions) (V2Request, Exchange, error)
