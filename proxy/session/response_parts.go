package session

import (
	"context"

	"github.com/tfsbridge/tfsbridge/translate"
)

// ResponseParts is ResponseChunk(ctx, body, true, Whole) for an adapter
// that can send a translated answer where it lies (ext_proc BUFFERED with
// its body codec, the reverse proxy): the same verdicts, headers and
// bytes, but a Continue's TF body is handed over in place, in the
// translator's pooled memory, instead of copied into Action.Body. The
// body is then in the Answer (Action.ReplaceBody set, Action.Body nil,
// content-length set to its Len), and the adapter must Release it exactly
// once, after the parts have been written, and never read them after.
// Any other outcome (an error answer, a TF gRPC answer, a body the
// session does not translate) is in the Action as ResponseChunk gives it,
// with an empty Answer, which Release ignores.
func (s *Session) ResponseParts(ctx context.Context, body []byte) (Action, translate.Answer) {
	if s.state != stResponseBody || s.grpc != nil || s.resp.started {
		return s.ResponseChunk(ctx, body, true, Whole), translate.Answer{}
	}
	// ResponseChunk's way for a whole body to Whole.
	s.resp.started = true
	out := &s.rooms.answer // the session's own: no allocation per exchange
	a := s.translateResponse(ctx, body, out)
	ans := out.ans
	out.ans = translate.Answer{}
	return a, ans
}

// answerSink is ResponseParts' Sink: like Whole it is answered with one
// message, the Action; the translated body is left here. Nothing is ever
// written to it.
type answerSink struct{ ans translate.Answer }

func (*answerSink) Headers(Action) error    { return errSink }
func (*answerSink) Body([]byte, bool) error { return errSink }

// emitAnswer hands a translated answer with the headers action a to out:
// in place to ResponseParts' sink, which releases it once written;
// copied into a for Whole; through streamOut to any other Sink, whose
// Body is done with each piece when it returns, so the answer is
// released at once.
func (s *Session) emitAnswer(out Sink, a Action, tf *translate.Answer) Action {
	switch o := out.(type) {
	case *answerSink:
		a.Body, a.ReplaceBody = nil, true
		o.ans, *tf = *tf, translate.Answer{}
		return a
	case whole:
		a.Body, a.ReplaceBody = tf.AppendTo(make([]byte, 0, tf.Len())), true
		tf.Release()
		return a
	}
	a = s.streamOut(out, a, tf.Parts())
	tf.Release()
	return a
}
