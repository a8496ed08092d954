package backend

import (
	"context"
	"errors"
	"net"
	"syscall"

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
// error a TF Serving client gets: connection refused, reset or an unknown
// host → 503 UNAVAILABLE; a timeout → 504 DEADLINE_EXCEEDED; a client that
// went away → 499 CANCELLED; anything else (a malformed or truncated
// answer) → 502. The cause is kept for logs; the message never shows the
// backend's address.
func TransportError(err error) *apierr.Error {
	e, _ := classify(err)
	return e
}

// classify is TransportError plus the metric kind.
func classify(err error) (*apierr.Error, string) {
	if e := (*apierr.Error)(nil); errors.As(err, &e) {
		return e, kindStatus
	}
	var netErr net.Error
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return apierr.Wrap(apierr.DeadlineExceeded, err, oip.MsgTimeout), kindTimeout
	case errors.Is(err, context.Canceled):
		return apierr.Wrap(apierr.Cancelled, err, "Request cancelled"), kindCancelled
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.As(err, &dnsErr):
		return apierr.Wrap(apierr.Unavailable, err, oip.MsgUnavailable), kindUnavailable
	}
	return apierr.Wrap(apierr.BadGateway, err, "Invalid response from the v2 inference server"), kindBadGateway
}
