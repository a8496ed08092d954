package oip

import (
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Content types of the request bodies EncodeRequest produces.
const (
	// ContentTypeBinary goes with binary-extension bodies: KServe only
	// takes the bytes path for a non-JSON content type, Triton ignores it.
	ContentTypeBinary = "application/octet-stream"
	// ContentTypeJSON goes with JSON-only bodies (MLServer).
	ContentTypeJSON = "application/json"
)

// EncodeOptions select the request dialect.
type EncodeOptions struct {
	// Kind is the server the body is for.
	Kind ServerKind
	// ID is the request "id"; empty means none is sent.
	ID string
}

// EncodeRequest appends to dst the v2 infer request body for inputs and
// returns it with the Inference-Header-Content-Length value (-1: JSON only,
// send no such header) and the content type.
//
// Triton and KServe get the binary extension: a JSON header naming every
// input with its binary_data_size and asking binary_data_output with no
// "outputs" list (so every output comes back binary, docs/open-inference-protocol.md §6.1), followed
// by each input's block in order. MLServer, which has no binary extension,
// gets JSON "data" (see encodeJSON).
//
// A tensor the server cannot take is a 400 *apierr.Error saying why: BF16
// anywhere but Triton, non-UTF-8 BYTES on KServe, ±Infinity on MLServer.
func EncodeRequest(dst []byte, inputs []tensor.Tensor, opt EncodeOptions) (body []byte, headerLength int, contentType string, err error) {
	switch opt.Kind {
	case Triton, KServe:
		return encodeBinary(dst, inputs, opt)
	case MLServer:
		return encodeJSON(dst, inputs, nil, opt)
	}
	return dst, 0, "", apierr.Errorf(apierr.Internal, "v2: unknown server kind %v", opt.Kind)
}

// EncodeRequestParts is EncodeRequest for tensors whose fixed-size data is
// held in pieces, as a streamed request stores it: data(i) gives
// inputs[i].Data as consecutive slices, each of whole elements (Data itself
// is not read; data is not called for BYTES inputs). The body comes back in
// parts that concatenate to the very bytes EncodeRequest would write. For
// the binary extension the parts are the JSON header, then each input's
// block as the pieces themselves, not copied (they must outlive the
// parts; BOOL and BYTES blocks are built); a JSON-only body is one part.
func EncodeRequestParts(inputs []tensor.Tensor, data func(i int) [][]byte, opt EncodeOptions) (parts [][]byte, headerLength int, contentType string, err error) {
	switch opt.Kind {
	case Triton, KServe:
		return encodeBinaryParts(inputs, data, opt)
	case MLServer:
		body, hl, ct, err := encodeJSON(nil, inputs, data, opt)
		if err != nil {
			return nil, 0, "", err
		}
		return [][]byte{body}, hl, ct, nil
	}
	return nil, 0, "", apierr.Errorf(apierr.Internal, "v2: unknown server kind %v", opt.Kind)
}
