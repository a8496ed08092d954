package session

import (
	"strconv"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// Verdict is what an adapter must do with the current HTTP message.
type Verdict uint8

const (
	// Continue forwards the message, after applying the Action's header
	// changes and, when ReplaceBody is set, replacing its body.
	Continue Verdict = iota
	// PassThrough forwards the message untouched and tells the adapter
	// that this exchange is not ours: it should stop sending this
	// exchange's bodies through the session (ext_proc: mode_override to
	// body mode NONE; reverse proxy: stream the bodies).
	PassThrough
	// Respond answers the client now with Status, Set headers and Body;
	// nothing (more) is forwarded upstream or downstream.
	Respond
	// Pending (streamed bodies) means nothing is to be sent yet: the
	// session needs more of the body.
	Pending
	// Reset (streamed bodies) means the exchange broke after part of its
	// output was sent: the adapter must abort it (reset the stream or
	// the connection) rather than answer.
	Reset
)

// String names the verdict for logs and test failures.
func (v Verdict) String() string {
	switch v {
	case Continue:
		return "continue"
	case PassThrough:
		return "pass-through"
	case Respond:
		return "respond"
	case Pending:
		return "pending"
	case Reset:
		return "reset"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// Header is one header to set. Key is lower-case; pseudo-headers (":path")
// are included as Envoy spells them.
type Header struct {
	Key, Value string
}

// Action is the session's protocol-neutral answer to one event.
type Action struct {
	Verdict Verdict
	// Status is the HTTP status of a Respond action.
	Status int
	// Set lists headers to add or overwrite (Continue) or the response
	// headers (Respond).
	Set []Header
	// Remove lists lower-case header names to remove (Continue).
	Remove []string
	// Body is the replacement body (Continue with ReplaceBody) or the
	// response body (Respond).
	Body []byte
	// ReplaceBody reports that Body replaces the current message body.
	ReplaceBody bool
	// ClearRouteCache asks the proxy to pick the route again after the
	// header changes (the model map sent the request to another server).
	ClearRouteCache bool
	// Observe, on a PassThrough of the request or response headers, asks
	// the adapter to keep handing this exchange's bodies to the session
	// (RequestChunk, RequestParts, ResponseChunk), which only looks at
	// them and answers PassThrough: each goes on unchanged. ext_proc then
	// sends no mode_override (the filter's body modes stay), the reverse
	// proxy feeds the bodies to the session as they stream. A sampled
	// exchange forwarded to a TF Serving server is observed so that its
	// shadow copy gets the request and the answer (shadow.go).
	Observe bool
	// Reason is a short token for proxy access logs (Envoy's
	// %RESPONSE_CODE_DETAILS%), e.g. "tfsbridge_INVALID_ARGUMENT".
	Reason string
}

// Header names the session reads or writes.
const (
	hdrContentType   = "content-type"
	hdrContentLength = "content-length"
	hdrContentEnc    = "content-encoding"
	hdrAcceptEnc     = "accept-encoding"
	hdrIHCL          = "inference-header-content-length"
	hdrPath          = ":path"
	hdrRequestID     = "x-request-id"
	hdrOrigin        = "origin"
	contentTypeJSON  = "application/json"
)

// Get returns the value of the header named key in a, and whether it is
// set. Adapters and tests use it to read a single header.
func (a Action) Get(key string) (string, bool) {
	for _, h := range a.Set {
		if h.Key == key {
			return h.Value, true
		}
	}
	return "", false
}

// jsonResponse is a Respond action with a TF Serving JSON body: the only
// header TF Serving sets is Content-Type (the proxy adds Content-Length).
func jsonResponse(status int, body []byte, reason string) Action {
	return Action{
		Verdict: Respond,
		Status:  status,
		Set:     []Header{{hdrContentType, contentTypeJSON}},
		Body:    body,
		Reason:  reason,
	}
}

// errorResponse is the Respond action for a user-facing error.
func errorResponse(e *apierr.Error) Action {
	return jsonResponse(e.HTTPStatus(), tfresponse.Error(nil, e.Msg), "tfsbridge_"+e.Code.String())
}
