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
// keeps the request body as its chunks arrive, and settle hands both to
// the engine (shadowTee.done). The client's bytes are never changed or
// held back: the tee only copies them, within the engine's memory cap,
// and the copy runs on the engine's goroutine.
//
// Only exchanges the session translates are shadowed. An exchange whose
// primary is a TF Serving server (the split branch's forward, a
// PassThrough) is not seen past its headers; to shadow it, forward must
// become a Continue that lets the bodies through unchanged while
// shadowTee.request and shadowTee.answer keep them (they take raw bytes).

// shadowed wraps p for the shadow comparison when the exchange's model
// has a shadow block and the engine samples this exchange; else it
// returns p. path is the TF request path, for a TF Serving shadow.
func (s *Session) shadowed(p pipeline, path string) pipeline {
	eng := s.cfg.Shadow
	ip, ok := p.(inferencePipeline)
	if eng == nil || !ok || s.rt.model == nil || s.rt.tf.Label != "" || !eng.Sample(s.rt.model.Shadow) {
		return p
	}
	target, ok := s.shadowTarget(s.rt.model.Shadow.Server)
	if !ok {
		return p
	}
	s.shadow = &shadowTee{eng: eng, c: shadow.Copy{RequestID: s.requestID, Path: path, Route: s.rt.tf, Entry: s.rt.model, Target: target}}
	return shadowPipeline{inferencePipeline: ip, tee: s.shadow}
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
	inferencePipeline
	tee *shadowTee
}

func (p shadowPipeline) start(ctx context.Context, s *Session, h HeaderGetter, eos bool) Action {
	return s.awaitBody(ctx, p, h, eos)
}

func (p shadowPipeline) response(body []byte, headerLength int, ex translate.Exchange, lim tensor.Limits) ([]byte, error) {
	tf, err := p.inferencePipeline.response(body, headerLength, ex, lim)
	if err == nil {
		p.tee.answer(tf)
	}
	return tf, err
}

func (p shadowPipeline) responseStream(headerLength int, ex translate.Exchange, lim tensor.Limits, out func([]byte) error) *translate.ResponseStream {
	return p.inferencePipeline.responseStream(headerLength, ex, lim, func(b []byte) error {
		p.tee.answer(b)
		return out(b)
	})
}

// shadowTee keeps one sampled exchange's request body and TF answer,
// their bytes reserved against the engine's memory cap as they come.
type shadowTee struct {
	eng     *shadow.Engine
	c       shadow.Copy
	req     []byte
	ans     []byte
	ended   bool // the whole request body was seen
	dropped bool // over the cap: counted, nothing more kept
}

// keep appends b to *dst within the memory cap; over it the copy is
// dropped and counted once.
func (t *shadowTee) keep(dst *[]byte, b []byte) {
	if t.dropped || len(b) == 0 {
		return
	}
	if !t.eng.Reserve(int64(len(b))) {
		t.drop()
		return
	}
	t.c.Reserved += int64(len(b))
	*dst = append(*dst, b...)
}

// drop counts the copy as dropped and lets its bytes go.
func (t *shadowTee) drop() {
	t.dropped = true
	t.eng.Drop(t.c.Route.Model, t.c.Reserved)
	t.c.Reserved, t.req, t.ans = 0, nil, nil
}

// request keeps a chunk of the request body (nil-safe: most exchanges
// have no tee).
func (t *shadowTee) request(chunk []byte, end bool) {
	if t == nil {
		return
	}
	t.keep(&t.req, chunk)
	t.ended = t.ended || end
}

// answer keeps a piece of the TF answer.
func (t *shadowTee) answer(b []byte) { t.keep(&t.ans, b) }

// done hands the copy to the engine once the exchange is answered with
// status (e the error answered, nil for a success). An exchange whose
// request body never ended, or that nobody was answered, is no copy.
func (t *shadowTee) done(s *Session, status int, e *apierr.Error) {
	if t == nil || t.dropped {
		return
	}
	if !t.ended || (e == nil && status != 200) {
		t.eng.Release(t.c.Reserved)
		t.c.Reserved = 0
		return
	}
	c := t.c
	c.Request = t.req
	if s.reqEncoding != "" {
		// The copy goes out identity-encoded, as TF Serving reads it.
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
	c.Primary = tfcompare.Answer{Status: status, Body: t.ans}
	if e != nil {
		c.Primary.Body = tfresponse.Error(nil, e.Msg)
	}
	t.dropped, t.req, t.ans = true, nil, nil // the engine's now
	t.eng.Submit(&c)
}
