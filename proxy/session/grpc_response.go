package session

import (
	"context"
	"encoding/binary"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/grpcmap"
)

// grpcResponseHeaders handles the v2 server's response headers: a
// trailers-only answer (end of stream) carries its status here and is
// rewritten now; otherwise the message and the trailers follow. The
// answer leaves uncompressed, so grpc-encoding goes.
func (s *Session) grpcResponseHeaders(status int, h HeaderGetter, endOfStream bool) Action {
	if status != http.StatusOK {
		// Not a gRPC answer (a proxy on the way failed): the client's
		// gRPC library maps the HTTP status itself.
		s.complete(status, apierr.New(apierr.FromHTTPStatus(status), statusText(status)))
		return Action{Verdict: Continue}
	}
	if endOfStream {
		return s.grpcStatus(h)
	}
	s.grpc.respEncoding = h.Get(hdrGRPCEncoding)
	s.state = stResponseBody
	return Action{Verdict: Continue, Remove: []string{hdrContentLength, hdrGRPCEncoding}}
}

// grpcResponseChunk gathers the v2 answer's one message, whatever the
// chunks, and translates it as soon as it is whole: out gets it at once
// (the trailers, with the status, still follow). An empty body is an
// error answer whose status is in the trailers.
func (s *Session) grpcResponseChunk(ctx context.Context, chunk []byte, end bool, out Sink) Action {
	rp, g := &s.resp, s.grpc
	if g.answered {
		if len(chunk) == 0 {
			if end && out != Whole {
				if err := out.Body(nil, true); err != nil {
					return s.reset(err)
				}
			}
			return Action{Verdict: Continue}
		}
		// A unary answer has one message; the first is already out.
		s.logDone(http.StatusBadGateway, apierr.New(apierr.Internal, "the v2 server sent a second response message"))
		return s.reset(errSink)
	}
	rp.n += int64(len(chunk))
	if err := s.checkSize("Response", rp.n); err != nil {
		return s.fail(err)
	}
	rp.text = append(rp.text, chunk...)
	if len(rp.text) >= grpcPrefix {
		if n := int64(binary.BigEndian.Uint32(rp.text[1:grpcPrefix])); n+grpcPrefix > s.maxBody() {
			return s.fail(s.tooLarge("Response"))
		}
	}
	if !grpcComplete(rp.text) {
		switch {
		case len(rp.text) == 0 && (end || out == Whole):
			// No message: the status (an error) comes in the trailers.
			// A streamed exchange still owes the held headers and the
			// body's end.
			if out != Whole {
				if err := out.Headers(Action{Verdict: Continue}); err != nil {
					return s.reset(err)
				}
				if err := out.Body(nil, true); err != nil {
					return s.reset(err)
				}
			}
			return Action{Verdict: Continue}
		case end || out == Whole:
			return s.fail(apierr.Errorf(apierr.Internal, "Invalid response from the v2 inference server: a truncated gRPC message (%d bytes)", len(rp.text)))
		}
		return Action{Verdict: Pending}
	}
	if err := s.grow(ctx, int64(len(rp.text))*admission.ResponseFactor); err != nil {
		return s.fail(err)
	}
	text := rp.text
	rp.text = nil
	s.cfg.Metrics.BodySize(observe.StageV2Response, len(text))
	msg, err := s.grpcMessage(text, g.respEncoding, "Response")
	if err != nil {
		return s.fail(err)
	}
	t0 := time.Now()
	tf, err := grpcmap.Response(make([]byte, grpcPrefix, grpcPrefix+len(msg)+64), msg, g.ex, g.opt)
	s.cfg.Metrics.Translation(observe.DirResponse, time.Since(t0))
	if err != nil {
		return s.fail(asBadGateway(err))
	}
	tf = prefixed(tf)
	s.holdAtLeast(int64(len(tf)))
	s.cfg.Metrics.BodySize(observe.StageTFResponse, len(tf))
	g.answered = true
	if out == Whole {
		return Action{Verdict: Continue, Body: tf, ReplaceBody: true}
	}
	if err := out.Headers(Action{Verdict: Continue}); err != nil {
		return s.reset(err)
	}
	for len(tf) > MaxPiece {
		if err := out.Body(tf[:MaxPiece], false); err != nil {
			return s.reset(err)
		}
		tf = tf[MaxPiece:]
	}
	// The trailers end the stream; a body that ends here had none.
	if err := out.Body(tf, end); err != nil {
		return s.reset(err)
	}
	if end {
		s.complete(http.StatusOK, nil)
	}
	return Action{Verdict: Continue}
}

// grpcComplete reports a buffer that holds at least one whole message.
func grpcComplete(b []byte) bool {
	return len(b) >= grpcPrefix && int64(len(b)-grpcPrefix) >= int64(binary.BigEndian.Uint32(b[1:grpcPrefix]))
}

// ResponseTrailers handles the upstream response trailers. For a TF gRPC
// exchange they carry the v2 status, rewritten into TF Serving's; other
// exchanges' trailers pass as they are.
func (s *Session) ResponseTrailers(ctx context.Context, h HeaderGetter) Action {
	if s.grpc == nil || s.state != stResponseBody {
		return Action{Verdict: Continue}
	}
	if !s.grpc.answered && len(s.resp.text) > 0 {
		// The body's end did not complete the message (full duplex).
		return s.fail(apierr.Errorf(apierr.Internal, "Invalid response from the v2 inference server: a truncated gRPC message (%d bytes)", len(s.resp.text)))
	}
	return s.grpcStatus(h)
}

// grpcStatus rewrites the v2 status in h (trailers, or the headers of a
// trailers-only answer) into TF Serving's, and ends the exchange.
func (s *Session) grpcStatus(h HeaderGetter) Action {
	raw := h.Get(hdrGRPCStatus)
	code, err := strconv.Atoi(raw)
	if raw == "" || err != nil {
		code = 2 // UNKNOWN: gRPC's answer for a status it cannot read
	}
	if code == 0 && raw != "" {
		s.complete(http.StatusOK, nil)
		return Action{Verdict: Continue}
	}
	msg := DecodeGRPCMessage(h.Get(hdrGRPCMessage))
	var e *apierr.Error
	if s.grpc.ex != nil {
		e = apierr.As(grpcmap.BackendError(code, msg, s.grpc.ex))
	} else {
		e = apierr.New(apierr.Code(code), msg)
	}
	switch e.Code {
	case apierr.Unavailable:
		s.cfg.Metrics.UpstreamFailure(s.ServerName(), observe.UpstreamServerError)
	case apierr.DeadlineExceeded:
		s.cfg.Metrics.UpstreamFailure(s.ServerName(), observe.UpstreamTimeout)
	}
	s.complete(e.HTTPStatus(), e)
	c, text := grpcmap.Status(e)
	a := Action{Verdict: Continue, Set: []Header{{hdrGRPCStatus, strconv.Itoa(c)}}, Remove: []string{hdrGRPCDetails}}
	if text != "" {
		a.Set = append(a.Set, Header{hdrGRPCMessage, EncodeGRPCMessage(text)})
	} else {
		a.Remove = append(a.Remove, hdrGRPCMessage)
	}
	return a
}

// grpcErrorResponse is the trailers-only answer to a gRPC call refused by
// tfsbridge: HTTP 200, content-type application/grpc, and the status in
// the headers (the ext_proc adapter turns it into an ImmediateResponse's
// grpc_status and body; Envoy writes both as trailers-only headers).
func grpcErrorResponse(e *apierr.Error) Action {
	code, text := grpcmap.Status(e)
	a := Action{
		Verdict: Respond,
		Status:  http.StatusOK,
		Set:     []Header{{hdrContentType, contentTypeGRPC}, {hdrGRPCStatus, strconv.Itoa(code)}},
		Reason:  "tfsbridge_" + e.Code.String(),
	}
	if text != "" {
		a.Set = append(a.Set, Header{hdrGRPCMessage, EncodeGRPCMessage(text)})
	}
	return a
}

// EncodeGRPCMessage percent-encodes a status message for the
// grpc-message header, as gRPC's HTTP/2 protocol asks: bytes outside
// printable ASCII, and '%', as %XX.
func EncodeGRPCMessage(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// DecodeGRPCMessage undoes EncodeGRPCMessage; a malformed escape stays as
// it is, as gRPC's decoders leave it.
func DecodeGRPCMessage(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
