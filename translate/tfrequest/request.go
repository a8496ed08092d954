// Package tfrequest parses TensorFlow Serving predict request bodies (row
// "instances" and columnar "inputs") into tensors as TF Serving's
// json_tensor.cc does: its value rules, shape and ragged checks and error
// texts. One decoder reads whole bodies (Parse) and streams alike.
package tfrequest

import (
	"sync"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// Resolver looks up the signature a request names ("" for none: TF's
// serving_default). Its error goes to the client as is: an *apierr.Error
// with TF's text (unknown model, unknown signature).
type Resolver func(signatureName string) (*tensor.Signature, error)

// Request is a parsed predict request.
type Request struct {
	// SignatureName is the request's "signature_name" ("" when absent).
	SignatureName string
	// Format is the request format, which decides the response format.
	Format tfjson.Format
	// Inputs are the input tensors in signature order. Their Data and
	// Strings may alias the body and pooled memory owned by the Request,
	// valid until Release. A stream's data may span several blocks, with
	// Data nil: Blocks gives every input's data.
	Inputs []tensor.Tensor
	// Signature is the signature the request was parsed against.
	Signature *tensor.Signature

	bufs   []*[]byte
	pooled []*[]byte  // streamed data blocks (blockPool)
	pieces [][][]byte // streamed inputs' data blocks, parallel to Inputs (see Blocks)
	shape  []int64    // backing store for the Inputs' shapes
}

// Release returns the Request's pooled tensor buffers; the Inputs must
// not be used afterwards. It is optional (garbage collection frees them
// too), but the pipeline calls it, so that a steady stream of requests
// allocates little more than the bodies it sends.
func (r *Request) Release() {
	if r == nil {
		return
	}
	for _, b := range r.bufs {
		if cap(*b) <= maxPooledBuf {
			*b = (*b)[:0]
			bufPool.Put(b)
		}
	}
	for _, b := range r.pooled { // streamed data blocks
		*b = (*b)[:0]
		blockPool.Put(b)
	}
	r.bufs, r.pooled, r.pieces, r.Inputs = nil, nil, nil, nil
}

// The request keys TF Serving reads (json_tensor.cc).
const (
	keySignature = "signature_name"
	keyInstances = "instances"
	keyInputs    = "inputs"
)

// bufPool holds tensor data buffers between requests.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledBuf keeps one huge request from pinning its buffer in the pool.
const maxPooledBuf = 64 << 20

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }
