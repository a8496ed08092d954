package session

import (
	"context"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/proxy/shadow"
	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// Shadow comparison joins the session as a pipeline: an exchange of a
// model with a `shadow:` block that the engine samples gets its verb's
// inference pipeline wrapped in shadowPipeline, which keeps a copy of
// the TF answer as the pipeline produces it; one line in RequestChunk
// keeps the request body as its chunks arrive, settle makes the copy of
// both (shadowTee.done), and once the adapter has sent the client's
// answer (ReleaseAdmission, or Close) the copy goes to the engine
// (shadowTee.handOff). The client's bytes are never changed or
// held back: the tee only copies them, within the engine's memory cap,
// and the copy runs on the engine's goroutine.
//
// An exchange forwarded to a TF Serving server (forwardPipeline, the
// split's TF Serving share or a model on TF Serving) is shadowed too, but
// only when it is sampled: the decision is made once, at the request
// headers, and an unsampled forward stays a PassThrough whose bodies
// never reach tfsbridge. A sampled one becomes an observedForward: still
// untranslated, but its action asks the adapter to hand the bodies to
// the session (Action.Observe), which keeps a copy of the request and of
// TF Serving's answer as they pass (observeRequest, observeResponse) and
// lets every byte go on unchanged.
//
// A server is not compared with itself: an exchange whose primary is the
// shadow server (a split's share on it) is not shadowed.

// shadowed wraps p for the shadow comparison when the exchange's model
// has a shadow block and the engine samples this exchange; else it
// returns p. path is the TF request path, for a TF Serving shadow.
func (s *Session) shadowed(p pipeline, path string) pipeline {
	eng := s.cfg.Shadow
	if eng == nil || s.rt.model == nil || s.rt.tf.Label != "" || !shadowable(p) {
		return p
	}
	sh := s.rt.model.Shadow
	if sh == nil || sh.Server == s.rt.srv || !eng.Sample(sh) {
		return p
	}
	target, ok := s.shadowTarget(sh.Server)
	if !ok {
		return p
	}
	t := &s.tee
	*t = shadowTee{eng: eng}
	t.take(newTeeRoom())
	*t.c = shadow.Copy{RequestID: s.requestID, Path: path, Route: s.rt.tf, Entry: s.rt.model, Target: target}
	s.shadow = t
	// The pipelines live in the tee: no allocation of their own.
	if fp, ok := p.(forwardPipeline); ok {
		t.of = observedForward{forwardPipeline: fp, tee: t}
		return &t.of
	}
	t.sp = shadowPipeline{inferencePipeline: p.(*inferencePipeline), tee: t}
	return &t.sp
}

// shadowable reports a pipeline whose exchanges a shadow copies: an
// inference verb, translated or forwarded.
func shadowable(p pipeline) bool {
	switch p := p.(type) {
	case *inferencePipeline:
		return true
	case forwardPipeline:
		return p.inference
	}
	return false
}

// shadowTarget is the server a shadow block names, from the map in force.
func (s *Session) shadowTarget(name string) (shadow.Target, bool) {
	if name == modelmap.DefaultServer {
		return shadow.Target{Name: name, Backend: s.cfg.Backend}, s.cfg.Backend != nil
	}
	if s.cfg.Mapping == nil {
		return shadow.Target{}, false
	}
	mp := s.cfg.Mapping()
	if mp == nil || mp.Map.Server(name) == nil {
		return shadow.Target{}, false
	}
	t := shadow.Target{Name: name, Kind: mp.Map.Server(name).Kind, URL: mp.URLs[name]}
	if be, ok := mp.Backends[name]; ok {
		t.Backend = be
	}
	return t, true
}

// shadowPipeline is an inference pipeline whose TF answers are copied to
// the exchange's shadow tee.
type shadowPipeline struct {
	*inferencePipeline
	tee *shadowTee
}

func (p *shadowPipeline) start(ctx context.Context, s *Session, h HeaderGetter, eos bool) Action {
	return s.awaitBody(ctx, p, h, eos)
}

func (p *shadowPipeline) response(body []byte, headerLength int, ex translate.Exchange, lim tensor.Limits) (translate.Answer, error) {
	tf, err := p.inferencePipeline.response(body, headerLength, ex, lim)
	if err == nil {
		p.tee.answer(tf.Parts()...)
		p.tee.v2Answer(body, headerLength, lim)
	}
	return tf, err
}

func (p *shadowPipeline) responseStream(headerLength int, ex translate.Exchange, lim tensor.Limits, out func([]byte) error) *translate.ResponseStream {
	return p.inferencePipeline.responseStream(headerLength, ex, lim, func(b []byte) error {
		p.tee.answer(b)
		return out(b)
	})
}

// observedForward is the forward of a sampled exchange: passed through
// untranslated, its bodies observed by the tee.
type observedForward struct {
	forwardPipeline
	tee *shadowTee
}

func (p *observedForward) start(ctx context.Context, s *Session, h HeaderGetter, eos bool) Action {
	a := p.forwardPipeline.start(ctx, s, h, eos)
	s.reqEncoding = h.Get(hdrContentEnc)
	p.tee.forward = true
	if eos {
		p.tee.request(nil, true)
	}
	a.Observe = true
	return a
}

// observeRequest is RequestChunk for an exchange the session does not
// translate: an observed forward's tee keeps the pieces; they go on
// unchanged either way.
func (s *Session) observeRequest(body [][]byte, end bool) Action {
	if t := s.shadow; t != nil && t.forward {
		t.request(body, end)
	}
	return Action{Verdict: PassThrough}
}

// observeResponseHeaders is ResponseHeaders for a pass-through exchange:
// an observed forward's tee notes TF Serving's status and encoding, and
// the answer's body is asked for (Observe) but left as it is.
func (s *Session) observeResponseHeaders(status int, h HeaderGetter, eos bool) Action {
	t := s.shadow
	if t == nil || !t.forward || t.status != 0 {
		return Action{Verdict: PassThrough}
	}
	t.status, t.ansEncoding = status, h.Get(hdrContentEnc)
	if eos {
		s.observed()
	}
	return Action{Verdict: PassThrough, Observe: true}
}

// observeResponse is ResponseChunk for an exchange the session does not
// translate: an observed forward's tee keeps TF Serving's answer, and
// hands the copy over at its end.
func (s *Session) observeResponse(chunk []byte, end bool) Action {
	if t := s.shadow; t != nil && t.forward && t.status != 0 && !t.dropped {
		t.answer(chunk)
		if end {
			s.observed()
		}
	}
	return Action{Verdict: PassThrough}
}

// observed hands an observed forward's copy to the engine once TF
// Serving's answer is complete: its status and body, decoded when TF
// Serving compressed it, as the client got them.
func (s *Session) observed() {
	t := s.shadow
	if t.dropped {
		return
	}
	if !t.ended {
		t.abandon()
		return
	}
	ans, err := decodeResponseBody(t.ansEncoding, t.ans, s.maxBody())
	if err != nil {
		t.abandon() // nothing to compare with
		return
	}
	if len(t.ans) > 0 && len(ans) > 0 && &ans[0] != &t.ans[0] {
		if !t.eng.Reserve(int64(len(ans))) {
			t.drop()
			return
		}
		t.c.Reserved += int64(len(ans))
	}
	t.submit(s, tfcompare.Answer{Status: t.status, Body: ans})
}

// shadowTee keeps one sampled exchange's request body and TF answer,
// their bytes reserved against the engine's memory cap as they come.
type shadowTee struct {
	eng *shadow.Engine
	// c is the copy being made, in room; nil once handed over, dropped
	// or abandoned.
	c   *shadow.Copy
	req []byte
	ans []byte
	// sent is the primary's v2 request, and answer, for the copy to
	// reuse (shadow.Sent); sigName the signature_name the primary's
	// translation resolved.
	sent    *shadow.Sent
	sigName string
	// pooled is the session's own v2 request (released at Close) when
	// sent is to get its bytes only at handOff.
	pooled *translate.V2Request
	// v2ans is the primary's v2 answer so far; v2Over: it outgrew
	// maxSentAnswer and is not kept.
	v2ans []byte
	// room is where the copy is made (req, ans and v2ans are its
	// buffers, sent its Sent, c its Copy): pooled, so that a sampled
	// exchange allocates nothing of its own (shadow_room.go). Nil once
	// the copy is handed to the engine (whose Recycle gives it back),
	// dropped or abandoned.
	room *teeRoom
	// status and ansEncoding are an observed forward's: TF Serving's
	// own answer's status and content-encoding.
	status      int
	ansEncoding string
	// The exchange's pipeline, in the tee (a Session holds its tee).
	sp shadowPipeline
	of observedForward
	// The flags, together (the tee is in every Session: it is kept
	// small).
	ended   bool // the whole request body was seen
	dropped bool // over the cap: counted, nothing more kept (or handed over)
	// pending: c is made (the exchange was answered), held (its bytes
	// reserved) until the answer has left: handOff.
	pending bool
	forward bool // an observed forward (observedForward)
	v2Over  bool
}

// resolving notes the signature_name the primary's request translation
// looks up (nil-safe).
func (t *shadowTee) resolving(name string) {
	if t != nil {
		t.sigName = name
	}
}

// sentRequest keeps a reference to the primary's v2 request, for a copy
// whose translation would write the same bytes (shadow.Sent): a body the
// session never gives back to a pool (a whole body's translation), or
// one held whole in the adapter's pieces, whose release the adapter and
// the copy then share (shareRelease); only within the memory cap, else
// the copy translates the request itself.
func (t *shadowTee) sentRequest(req translate.V2Request, ex translate.Exchange, opt translate.RequestOptions) {
	if !t.sends() {
		return
	}
	n := int64(req.Len())
	if !t.eng.Reserve(n) {
		return
	}
	t.c.Reserved += n
	t.sent = t.newSent(&req, ex, opt)
	if req.Parts == nil {
		t.room.one[0] = req.Body // as req.Chunks(), without allocating
		t.sent.Body = t.room.one[:]
	} else {
		t.sent.Body = req.Parts
	}
}

// sends reports a tee whose copy may reuse the primary's v2 request: a
// translated exchange's copy to a v2 server (one to TF Serving sends the
// client's TF request). Nil-safe.
func (t *shadowTee) sends() bool {
	return t != nil && !t.dropped && !t.forward && t.c.Target.Kind != shadow.KindTFServing
}

// newSent is what a copy may reuse of the primary's request req, but for
// its bytes, which sentRequest and takePooled each give in their way.
func (t *shadowTee) newSent(req *translate.V2Request, ex translate.Exchange, opt translate.RequestOptions) *shadow.Sent {
	s := &t.room.sent
	*s = shadow.Sent{ContentType: req.ContentType, HeaderLength: req.HeaderLength,
		Options: opt, SignatureName: t.sigName, Exchange: ex, AnswerHeaderLength: -1}
	return s
}

// shareRelease returns the release the adapter calls for the primary's
// v2 request parts once it has written them: release itself, or, when
// the copy keeps a reference to the parts, its share of release with the
// copy (shadow.SharedRelease), so that the parts go back to their pool
// only once both are done with them. Nil-safe.
func (t *shadowTee) shareRelease(release func()) func() {
	if t == nil || t.sent == nil || t.sent.Body == nil || t.dropped {
		return release
	}
	r := shadow.NewSharedRelease(release)
	t.sent.Release = r.Done
	return r.Done
}

// sentPooled is sentRequest for a body in pooled memory, which the
// session gives back at Close: its bytes are copied for the copy at
// handOff, after the answer has left, if the session still holds them.
func (t *shadowTee) sentPooled(req *translate.V2Request, ex translate.Exchange, opt translate.RequestOptions) {
	if !t.sends() {
		return
	}
	t.sent = t.newSent(req, ex, opt)
	t.pooled = req
}

// takePooled gives c's Sent the bytes of the pooled request sentPooled
// noted, copied while the session still holds them; else the copy
// translates the request itself.
func (t *shadowTee) takePooled(c *shadow.Copy) {
	p := t.pooled
	t.pooled = nil
	s := c.Sent
	if s == nil || s.Body != nil {
		return
	}
	c.Sent = nil
	if p == nil {
		return
	}
	n := p.Len() // 0 once released (Close): a v2 body is never empty
	if n == 0 || !t.eng.Reserve(int64(n)) {
		return
	}
	body := grown(t.room.pooled[:0], n)
	for _, part := range p.Chunks() {
		body = append(body, part...)
	}
	t.room.pooled, t.room.one[0] = body, body
	s.Body, c.Sent = t.room.one[:], s
	c.Reserved += int64(n)
}

// takePooledAtClose takes the pooled request's bytes for a copy not yet
// handed off when the session ends (the reverse proxy hands its copies
// off at Close), before Close gives them back: only a small body, as the
// adapter may not have sent its answer yet (a larger one is translated
// by the copy itself). Nil-safe.
func (t *shadowTee) takePooledAtClose() {
	if t == nil || !t.pending || t.pooled == nil || t.pooled.Len() > maxSentAnswer {
		return
	}
	t.takePooled(t.c)
}

// maxSentAnswer is the largest primary v2 answer the tee copies for a
// copy to compare with its own before translating it, and the largest
// pooled request it copies before the answer has surely left (Close): a
// small copy on the primary's path spares the copy's translation; a large
// one would cost the client more than it saves.
const maxSentAnswer = 64 << 10

// v2Answer keeps a copy of the next piece of the primary's v2 answer (a
// whole answer is one piece; the adapter's buffers are its own), when the
// copy will send the primary's request; past maxSentAnswer bytes it gives
// the answer up.
func (t *shadowTee) v2Answer(b []byte, headerLength int, lim tensor.Limits) {
	if t == nil || t.sent == nil || t.dropped || t.v2Over {
		return
	}
	if len(t.v2ans)+len(b) > maxSentAnswer {
		t.v2Over, t.sent.Answer = true, nil
		return
	}
	if t.keep(&t.v2ans, b); t.dropped {
		return
	}
	t.sent.Answer, t.sent.AnswerHeaderLength, t.sent.AnswerLimits = t.v2ans, headerLength, lim
	if t.sent.Answer == nil {
		t.sent.Answer = []byte{}
	}
}

// keep appends the pieces to *dst within the memory cap; over it the
// copy is dropped and counted once. Several pieces at once (a whole body
// in the frames it came in) grow *dst once, to their size.
func (t *shadowTee) keep(dst *[]byte, pieces ...[]byte) {
	n := size(pieces)
	if t.dropped || n == 0 {
		return
	}
	if !t.eng.Reserve(int64(n)) {
		t.drop()
		return
	}
	t.c.Reserved += int64(n)
	if len(pieces) > 1 {
		*dst = grown(*dst, n)
	}
	for _, b := range pieces {
		*dst = append(*dst, b...)
	}
}

// drop counts the copy as dropped and lets its bytes go.
func (t *shadowTee) drop() {
	t.dropped = true
	t.eng.Drop(t.c.Route.Model, t.c.Reserved)
	t.letGo()
}

// letGo forgets the copy's bytes and gives its room back: nothing else
// refers to them (it was not handed over).
func (t *shadowTee) letGo() {
	if r := t.room; r != nil {
		t.stow()
		r.recycle()
	}
	t.c, t.req, t.ans, t.sent, t.pooled, t.v2ans, t.room = nil, nil, nil, nil, nil, nil, nil
}

// stow puts the tee's buffers back in its room, which keeps their
// capacity for its next copy.
func (t *shadowTee) stow() { t.room.req, t.room.ans, t.room.v2ans = t.req, t.ans, t.v2ans }

// abandon lets a copy that will not be sent go, uncounted (nil-safe; a
// copy already handed over or dropped is not touched).
func (t *shadowTee) abandon() {
	if t == nil || t.dropped {
		return
	}
	t.eng.Release(t.c.Reserved)
	t.dropped = true
	t.letGo()
}

// request keeps the next pieces of the request body, end set with the
// last (nil-safe: most exchanges have no tee).
func (t *shadowTee) request(body [][]byte, end bool) {
	if t == nil || t.ended {
		return
	}
	t.keep(&t.req, body...)
	t.ended = end
}

// answer keeps a piece of the TF answer.
func (t *shadowTee) answer(b ...[]byte) { t.keep(&t.ans, b...) }

// done hands the copy to the engine once the exchange is answered with
// status (e the error answered, nil for a success). An exchange whose
// request body never ended, or that nobody was answered, is no copy.
func (t *shadowTee) done(s *Session, status int, e *apierr.Error) {
	if t == nil || t.dropped {
		return
	}
	if !t.ended || (e == nil && status != 200) {
		t.abandon()
		return
	}
	primary := tfcompare.Answer{Status: status, Body: t.ans}
	if e != nil {
		primary.Body = tfresponse.Error(nil, e.Msg)
		if t.sent != nil {
			t.sent.Answer = nil // not the v2 answer's translation
		}
	}
	t.submit(s, primary)
}

// submit hands the copy, with the primary's answer, to the engine: the
// request identity-encoded, as TF Serving reads it.
func (t *shadowTee) submit(s *Session, primary tfcompare.Answer) {
	c := t.c
	c.Request = t.req
	if s.reqEncoding != "" {
		body, err := decodeRequestBody(s.reqEncoding, t.req, s.maxBody())
		if err != nil {
			body = nil // TF reads an undecodable body as empty
		}
		if !t.eng.Reserve(int64(len(body))) {
			t.drop()
			return
		}
		c.Reserved += int64(len(body))
		c.Request = body
	}
	c.Primary = primary
	if c.Sent = t.sent; c.Sent != nil && primary.Status != 200 {
		c.Sent.Answer = nil // not the v2 answer's translation
	}
	// The copy's now; the room keeps the buffers' capacity for the next.
	t.stow()
	t.dropped, t.req, t.ans, t.sent, t.v2ans = true, nil, nil, nil, nil
	c.Recycle = t.room.free
	t.pending = true
}

// handOff gives the engine the copy submit made, once the adapter has
// sent the client's answer (ReleaseAdmission, or at the latest Close):
// the copy's translation and HTTP exchange then do not compete for the
// CPU with the end of the exchange they copy. Nil-safe; once.
func (t *shadowTee) handOff() {
	if t == nil || !t.pending {
		return
	}
	c := t.c
	t.takePooled(c)
	// The engine's until it calls c.Recycle.
	t.pending, t.c, t.room = false, nil, nil
	t.eng.Submit(c)
}
