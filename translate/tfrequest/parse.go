package tfrequest

import (
	"sync"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Resolver looks up the signature a request names ("" when it names none,
// which TF Serving reads as serving_default). Its error is returned to the
// client as is, so it should be an *apierr.Error with TF's text (unknown
// model, unknown signature).
type Resolver func(signatureName string) (*tensor.Signature, error)

// Request is a parsed predict request.
type Request struct {
	// SignatureName is the request's "signature_name" ("" when absent).
	SignatureName string
	// Format is the request format, which decides the response format.
	Format Format
	// Inputs are the input tensors in signature input order. Their Data
	// and Strings may alias the request body and pooled memory owned by
	// the Request: they stay valid until Release. A streamed body's
	// numeric data may span several blocks, and Data is then nil: Blocks
	// gives the data of every input, whichever parser made it.
	Inputs []tensor.Tensor
	// Signature is the signature the request was parsed against.
	Signature *tensor.Signature

	doc    *jsontext.Document
	bufs   []*[]byte
	pooled []*[]byte  // streamed data blocks (blockPool)
	pieces [][][]byte // streamed inputs' data blocks, parallel to Inputs (see Blocks)
	shape  []int64    // backing store for the Inputs' shapes
}

// Release returns the Request's pooled memory (the parsed document and the
// tensor data buffers). The Inputs must not be used afterwards. Calling it
// is optional — without it the memory is simply garbage collected — but the
// request pipeline does, so that a steady stream of requests allocates
// little more than the bodies it sends.
func (r *Request) Release() {
	if r == nil {
		return
	}
	if r.doc != nil {
		r.doc.Release()
		r.doc = nil
	}
	for _, b := range r.bufs {
		putBuf(b)
	}
	r.bufs = nil
	r.releaseBlocks()
	r.Inputs = nil
}

// The request keys TF Serving reads (json_tensor.cc).
const (
	keySignature = "signature_name"
	keyInstances = "instances"
	keyInputs    = "inputs"
	keyB64       = "b64"
)

// Parse parses a TF Serving predict request body the way TF Serving's
// FillPredictRequestFromJson does, check for check and in the same order
// (docs/tfserving-rest.md §2.3, §3, §4): JSON syntax, top level is an object, signature_name
// is a string; then resolve (its error is returned as is); then an input
// map must exist, exactly one of "instances" / "inputs", and the values
// are converted against the signature's input names and dtypes. Last
// comes the input-count check TF's predictor makes before the model
// (predict_util.cc VerifyRequestInputsSize), so a parsed Request holds
// exactly one tensor per signature input.
//
// Every failure is an *apierr.Error carrying TF Serving's message. lim
// bounds nesting depth and the total number of tensor elements.
func Parse(body []byte, resolve Resolver, lim tensor.Limits) (*Request, error) {
	lim = lim.OrDefault()
	doc, err := ParseJSON(body, lim)
	if err != nil {
		return nil, err
	}
	r := &Request{doc: doc}
	if err := r.parse(doc.Root(), resolve, lim); err != nil {
		r.Release()
		return nil, err
	}
	return r, nil
}

func (r *Request) parse(root jsontext.Value, resolve Resolver, lim tensor.Limits) error {
	if root.Kind() != jsontext.Object {
		return formatError(root, msgNotObject)
	}
	if v, ok := root.Member(keySignature); ok {
		if v.Kind() != jsontext.String {
			return formatError(root, msgSignatureType)
		}
		r.SignatureName = string(v.Str())
	}
	sig, err := resolve(r.SignatureName)
	if err != nil {
		return err
	}
	if sig == nil || len(sig.Inputs) == 0 {
		return errNoInputMap(r.SignatureName)
	}
	r.Signature = sig

	instances, hasInstances := root.Member(keyInstances)
	inputs, hasInputs := root.Member(keyInputs)
	p := &filler{req: r, sig: sig, lim: lim}
	p.init()
	switch {
	case hasInstances && hasInputs:
		return formatError(root, msgBothKeys)
	case hasInstances:
		if instances.Kind() != jsontext.Array {
			return formatError(root, msgInstancesType)
		}
		if instances.Len() == 0 {
			return formatError(root, msgInstancesEmpty)
		}
		r.Format = Row
		err = p.rows(instances)
	case hasInputs:
		r.Format = Columnar
		err = p.columns(inputs)
	default:
		return errMissingKey()
	}
	if err != nil {
		return err
	}
	if err := p.finish(); err != nil {
		return err
	}
	return verifyInputsSize(sig, r.Inputs)
}

// formatError is json_tensor.cc's FormatError: "JSON Value: <dump> <msg>".
func formatError(v jsontext.Value, msg string) error {
	return formatDumpError(jsontext.AppendDump(nil, v), msg)
}

// bufPool holds tensor data buffers between requests.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledBuf keeps one huge request from pinning its buffer in the pool.
const maxPooledBuf = 64 << 20

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > maxPooledBuf {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}
