package backend

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
)

// ErrModelNotFound marks a 404 from the v2 server for a model (or model
// version). The *apierr.Error returned with it carries TF's text for
// predict and metadata; callers that need another text (model status)
// test for it with errors.Is.
var ErrModelNotFound = errors.New("v2 server: model not found")

// Error kinds, used as metric label values.
const (
	kindUnavailable = "unavailable"
	kindTimeout     = "timeout"
	kindBadGateway  = "bad_gateway"
	kindNotFound    = "not_found"
	kindStatus      = "status"
	kindCancelled   = "cancelled"
)

// TransportError maps a failed HTTP round trip to the v2 server onto the
// error a TF Serving client gets: connection refused, reset, closed
// before an answer or an unknown host → 503 UNAVAILABLE (Envoy's router
// answers 503 "upstream connect error or disconnect/reset before headers"
// for the same faults, so both transports agree); a timeout → 504
// DEADLINE_EXCEEDED; a client that went away → 499 CANCELLED; anything
// else (a malformed or truncated answer) → 502. The cause is kept for
// logs; the message never shows the backend's address.
func TransportError(err error) *apierr.Error {
	e, _, _ := classify(err)
	return e
}

// RoundTripError is TransportError for an inference call that failed
// before any response header arrived, with its failure reason. Whatever
// the server did then — closed, reset, or answered something that is not
// HTTP — is 503 UNAVAILABLE, as Envoy's router answers every such fault
// ("upstream connect error or disconnect/reset before headers. reset
// reason: ..."), so the proxy and ext_proc agree; a timeout stays 504.
func RoundTripError(err error) (*apierr.Error, string) {
	e, kind, reason := classify(err)
	if kind == kindBadGateway {
		return apierr.Wrap(apierr.Unavailable, err, oip.MsgUnavailable), reason
	}
	return e, reason
}

// FailureReason is the reason label of tfsbridge_upstream_failures_total
// for a failed round trip (observe.Upstream*), "" for a call the client
// cancelled, which is no failure of the server's.
func FailureReason(err error) string {
	_, _, reason := classify(err)
	return reason
}

// classify is TransportError plus the metric kind and failure reason.
func classify(err error) (*apierr.Error, string, string) {
	if e := (*apierr.Error)(nil); errors.As(err, &e) {
		return e, kindStatus, observe.UpstreamBadResponse
	}
	var netErr net.Error
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return apierr.Wrap(apierr.DeadlineExceeded, err, oip.MsgTimeout), kindTimeout, observe.UpstreamTimeout
	case errors.Is(err, context.Canceled):
		return apierr.Wrap(apierr.Cancelled, err, "Request cancelled"), kindCancelled, ""
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.As(err, &dnsErr):
		return apierr.Wrap(apierr.Unavailable, err, oip.MsgUnavailable), kindUnavailable, observe.UpstreamConnect
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		// A connection closed before the first byte of an answer is
		// io.EOF from net/http (a body cut short is ErrUnexpectedEOF,
		// which stays a bad response).
		errors.Is(err, io.EOF):
		return apierr.Wrap(apierr.Unavailable, err, oip.MsgUnavailable), kindUnavailable, observe.UpstreamReset
	}
	return apierr.Wrap(apierr.BadGateway, err, "Invalid response from the v2 inference server"), kindBadGateway, observe.UpstreamBadResponse
}
