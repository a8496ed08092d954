package translate

import (
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
)

// Exchange is what the response side of one predict call needs to know
// about its request side. The per-request session keeps it between the two.
type Exchange struct {
	// Format is the request format, which decides the response format.
	Format tfrequest.Format
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

// V2Request is a translated request body ready to send upstream.
type V2Request struct {
	Body []byte
	// HeaderLength is the value for Inference-Header-Content-Length, or -1
	// when the body is JSON only and the header must not be sent.
	HeaderLength int
	// ContentType is the Content-Type to send with Body.
	ContentType string
}
