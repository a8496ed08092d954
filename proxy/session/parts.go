package session

import "context"

// RequestParts is RequestChunk with Whole for a whole request body that
// arrived in pieces the adapter still holds (ext_proc BUFFERED: the
// frames of the gRPC message, which nothing needs to copy into one
// slice). It answers as RequestChunk(ctx, join(chunks), true, Whole)
// would, the same verdicts, reservation and bytes, but a Continue's v2
// body is returned in parts instead of in Action.Body when the body is
// binary (Action.ReplaceBody is set, Action.Body nil): the JSON header,
// then the tensors as the decoder stored them, built once and never
// copied. The parts stay valid after the session is closed, so a
// transport may write them after Close; they are the decoder's pooled
// blocks, which release gives back (call it exactly once, once the parts
// are written and never read again; a nil release means the collector
// frees them). The chunks are not needed once RequestParts returns.
//
// The pieces take the one body path (requestBody) at once, end set: a
// predict body is read by the streaming decoder piece by piece, and the
// few bodies it cannot settle alone (tfrequest.ErrUndecided) are settled
// from the whole text, which is held; the bodies that are not read as
// streams (a content-encoding, a TF gRPC message, classify and regress)
// are gathered and translated whole.
func (s *Session) RequestParts(ctx context.Context, chunks [][]byte) (_ Action, parts [][]byte, release func()) {
	var out partsSink
	a := s.requestBody(ctx, chunks, true, &out)
	return a, out.parts, out.release // requestBody sets release only with parts
}

// partsSink is RequestParts' Sink: like Whole it is answered with one
// message, the Action, which carries a one-part body itself; a body in
// several parts is left here instead. Nothing is ever written to it.
type partsSink struct {
	parts [][]byte
	// release gives the parts' memory back (see RequestParts).
	release func()
}

func (*partsSink) Headers(Action) error    { return errSink }
func (*partsSink) Body([]byte, bool) error { return errSink }
