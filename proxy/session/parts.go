package session

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/tracing"
	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
)

// RequestParts is RequestChunk with Whole for a whole request body that
// arrived in pieces the adapter still holds (ext_proc BUFFERED: the
// frames of the gRPC message, which nothing needs to copy into one
// slice). It answers as RequestChunk(ctx, join(chunks), true, Whole)
// would, the same verdicts, reservation and bytes, but a Continue's v2
// body is returned in parts instead of in Action.Body when the body is
// binary (Action.ReplaceBody is set, Action.Body nil): the JSON header,
// then the tensors as the decoder stored them, built once and never
// copied. The parts stay valid after the session is closed (the
// collector frees them), so a transport may write them after Close; the
// chunks are not needed once RequestParts returns.
//
// A predict body is read by the streaming decoder chunk by chunk; the
// few bodies it cannot settle in one pass (tfrequest.ErrUndecided) and
// the bodies that are not read as streams (a content-encoding, classify
// and regress) are joined and translated whole.
func (s *Session) RequestParts(ctx context.Context, chunks [][]byte) (Action, [][]byte) {
	if s.state != stRequestBody {
		// Not translated: nothing to join, the body goes on as it is.
		return s.observeRequestParts(chunks), nil
	}
	if s.req.started || s.grpc != nil {
		// A TF gRPC message is translated whole (grpcRequest): its v2
		// message is built once, into the Action's Body.
		return s.RequestChunk(ctx, bytes.Join(chunks, nil), true, Whole), nil
	}
	rs := s.body.requestStream(s.resolver(ctx), s.partsOptions())
	if s.reqEncoding != "" || rs == nil {
		if rs != nil {
			rs.Abort()
		}
		return s.RequestChunk(ctx, bytes.Join(chunks, nil), true, Whole), nil
	}
	s.req.started = true
	s.shadow.requestParts(chunks)
	n := 0
	for _, c := range chunks {
		n += len(c)
	}
	s.cfg.Metrics.BodySize(observe.StageTFRequest, n)
	if err := s.checkSize("Request", int64(n)); err != nil {
		rs.Abort()
		return s.fail(err), nil
	}
	if err := s.reserveUpTo(ctx, int64(n)*admission.RequestFactor); err != nil {
		rs.Abort()
		return s.fail(err), nil
	}
	t0 := time.Now()
	_, span := tracing.Start(ctx, tracing.SpanTranslateRequest)
	for _, c := range chunks {
		if len(c) > 0 && rs.Write(c) != nil {
			break // final: Close returns it
		}
	}
	req, ex, err := rs.Close()
	if errors.Is(err, tfrequest.ErrUndecided) {
		// Settled by the whole text, as a whole body always is.
		req, ex, err = s.body.request(bytes.Join(chunks, nil), s.resolver(ctx), s.requestOptions())
	}
	span.End()
	s.cfg.Metrics.Translation(observe.DirRequest, time.Since(t0))
	if err != nil {
		return s.fail(err), nil
	}
	s.exchange = ex
	a := s.requestAction(req)
	a.ReplaceBody = true
	if req.Parts == nil {
		a.Body = req.Body
		return a, nil
	}
	// Not released to the decoder's pool at Close: a transport may still
	// be writing the parts then.
	return a, req.Parts
}

// partsOptions are the streaming decoder's options for RequestParts: the
// first replayBytes of text kept for the decoder's own second look, the
// rest of the undecided bodies settled from the chunks.
func (s *Session) partsOptions() (opt translate.RequestOptions) {
	opt = s.requestOptions()
	opt.ReplayBytes = replayBytes
	return opt
}
