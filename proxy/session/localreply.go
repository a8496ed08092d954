package session

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
)

// Behind Envoy, some answers to a translated exchange are made by Envoy
// itself, not by the v2 server. Those sent before any response headers
// went into the filter chain run through the encoder filters, ext_proc
// included, so the session sees them as response headers and a body:
//
//   - before the request body reached tfsbridge: the connection manager's
//     413 for a body over its buffer limit, 408 when the client was too
//     slow (request_timeout), or another filter's refusal;
//   - instead of the v2 answer: the router's 504 "upstream request
//     timeout" (route timeout before the response headers) and 503
//     "upstream connect error or disconnect/reset before headers. ..." or
//     "no healthy upstream".
//
// A TF client gets the TF error the reverse proxy gives for the same
// failure, so both transports answer alike. (Envoy's replies after the
// response headers reached the filter chain — a route timeout while a
// slow body is buffered — bypass the filters and stay Envoy's own.)

// envoyConnectFailures are the beginnings of the router's texts for an
// upstream it could not reach or that went away before answering.
var envoyConnectFailures = []string{
	"upstream connect error or disconnect/reset before headers",
	"no healthy upstream",
}

// localReplyBeforeBody answers a response that arrives while the session
// still awaits the request body: the request never left Envoy, so this is
// Envoy's own reply (or another filter's), never the v2 server's. An
// error status becomes the TF error the reverse proxy gives in the same
// situation; anything else passes through.
func (s *Session) localReplyBeforeBody(status int) Action {
	var err *apierr.Error
	switch {
	case status == http.StatusRequestEntityTooLarge:
		// Envoy's buffer limit should be at least --max-body-bytes
		// (README), so the body is over ours too.
		err = s.tooLarge("Request")
	case status == http.StatusRequestTimeout:
		err = apierr.New(apierr.InvalidArgument, "Timed out reading the request body")
	case status >= 400 && status <= 599:
		err = apierr.New(apierr.FromHTTPStatus(status), statusText(status))
	default:
		s.state = stPassThrough
		return Action{Verdict: PassThrough}
	}
	return s.fail(err)
}

// transportError recognises a 502/503/504 that reports a transport
// failure on the way to the v2 server rather than the server's own error
// (which is always a JSON object): any non-JSON 504 is a gateway's
// timeout, and a 502/503 in Envoy's words is its router failing to reach
// the server. It returns the reverse proxy's error for the same failure,
// or nil, and the reason label of tfsbridge_upstream_failures_total.
func transportError(status int, body []byte) (*apierr.Error, string) {
	b := bytes.TrimSpace(body)
	if len(b) > 0 && b[0] == '{' {
		return nil, ""
	}
	switch status {
	case http.StatusGatewayTimeout:
		return apierr.New(apierr.DeadlineExceeded, oip.MsgTimeout), observe.UpstreamTimeout
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		for _, p := range envoyConnectFailures {
			if strings.HasPrefix(string(b), p) {
				return apierr.New(apierr.Unavailable, oip.MsgUnavailable), envoyFailureReason(string(b))
			}
		}
	}
	return nil, ""
}

// envoyFailureReason tells, from the router's text, a server that could
// not be reached ("no healthy upstream", "reset reason: connection
// failure", "... overflow") from one that went away before answering
// ("connection termination", "remote reset", ...).
func envoyFailureReason(text string) string {
	if strings.HasPrefix(text, "no healthy upstream") || strings.Contains(text, "connection failure") ||
		strings.Contains(text, "overflow") {
		return observe.UpstreamConnect
	}
	return observe.UpstreamReset
}

// declaredOver reports a content-length header over the body limit.
func (s *Session) declaredOver(h HeaderGetter) bool {
	n := declaredLength(h)
	return n > s.maxBody()
}

// declaredLength is a message's content-length, -1 when absent or bad.
func declaredLength(h HeaderGetter) int64 {
	v := h.Get(hdrContentLength)
	if v == "" {
		return -1 // no strconv error to build for the common case
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

func statusText(status int) string {
	if t := http.StatusText(status); t != "" {
		return t
	}
	return "HTTP status " + strconv.Itoa(status)
}
