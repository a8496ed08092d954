package translate

import (
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Format is the TF Serving request format, which decides the response
// format: row ("instances" in, "predictions" out) or columnar ("inputs" in,
// "outputs" out).
type Format uint8

// The request formats.
const (
	FormatRow Format = iota + 1
	FormatColumnar
)

// String returns "row" or "columnar".
func (f Format) String() string {
	switch f {
	case FormatRow:
		return "row"
	case FormatColumnar:
		return "columnar"
	}
	return "unknown"
}

// Exchange is what the response side of one predict call needs to know
// about its request side. The per-request session keeps it between the two.
type Exchange struct {
	Format Format
	// Unbatched reports that the request's leading batch dimension of 1
	// was dropped because the model does not batch; the response side puts
	// it back so row-format output still has one prediction per instance.
	Unbatched bool
	// Signature is the model signature the request was parsed against.
	Signature *tensor.Signature
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
