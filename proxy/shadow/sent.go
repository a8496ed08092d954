package shadow

import (
	"bytes"
	"sync/atomic"

	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Sent is what the primary was sent and answered, handed to a copy by
// reference: the session never changes these bytes, nor gives them back
// to a pool. A copy to a server of the primary's kind whose signature is
// the primary's sends Body as it is instead of translating the client's
// request again (the translation is a function of the TF body, the
// signature and the options, so it would write these very bytes), and an
// answer whose bytes are the primary's v2 answer is a match without being
// translated.
type Sent struct {
	// Body is the primary's v2 request body, in parts.
	Body [][]byte
	// ContentType and HeaderLength are the request's Content-Type and
	// Inference-Header-Content-Length (-1 for none).
	ContentType  string
	HeaderLength int
	// Options are the options of the primary's request translation.
	Options translate.RequestOptions
	// SignatureName is the signature_name the translation resolved.
	SignatureName string
	// Exchange is what the request translation passed to the answer's.
	Exchange translate.Exchange
	// Answer is the primary's v2 answer body when it was kept (nil
	// otherwise), with its Inference-Header-Content-Length (-1 for none)
	// and the limits its translation to TF ran with.
	Answer             []byte
	AnswerHeaderLength int
	AnswerLimits       tensor.Limits
	// Release, when not nil, is the copy's share of Body's release: Body
	// is pooled memory, given back once the adapter and the copy have
	// both released it (a copy that never does leaves it to the
	// collector). The engine calls it once, when it no longer reads Body.
	Release func()
}

// takeRelease returns s's Release, once (nil after that, and for a nil s).
func (s *Sent) takeRelease() func() {
	if s == nil {
		return nil
	}
	r := s.Release
	s.Release = nil
	return r
}

// SharedRelease is a release shared by two holders: the memory goes back
// when both have let it go. If either never does, nothing is given back
// and the collector frees the memory, which is always safe.
type SharedRelease struct {
	left    atomic.Int32
	release func()
}

// NewSharedRelease returns release shared by two holders, each to call
// Done once.
func NewSharedRelease(release func()) *SharedRelease {
	r := &SharedRelease{release: release}
	r.left.Store(2)
	return r
}

// Done is one holder's release.
func (r *SharedRelease) Done() {
	if r.left.Add(-1) == 0 {
		r.release()
	}
}

// sameRequest is c's Sent when the copy's request, translated for its
// server with opt, would be the primary's bytes: the same kind, id and
// limits, and the shadow server's TF signature (resolved into res, which
// then names the v2 model to call) equal to the primary's. Nil means the
// request is translated.
func (e *Engine) sameRequest(res *resolver, c *Copy, opt translate.RequestOptions) *Sent {
	s := c.Sent
	if s == nil || s.Exchange.Signature == nil {
		return nil
	}
	o := s.Options
	if o.Kind != opt.Kind || o.ID != opt.ID || o.Limits != opt.Limits || o.MaxBytes != opt.MaxBytes {
		return nil
	}
	sig, err := res.fn(s.SignatureName)
	if err != nil || !sig.Equal(s.Exchange.Signature) {
		return nil
	}
	return s
}

// sameAnswer reports a shadow's 2xx v2 answer that is the primary's, byte
// for byte, read with the same header length, but for the v2 "id" a
// server writes first (Triton's and KServe's form): its TF translation
// would be the primary's TF answer, which has no id.
func (e *Engine) sameAnswer(s *Sent, body []byte, headerLength int) bool {
	if s.Answer == nil || s.AnswerLimits != e.o.Limits {
		return false
	}
	a, b := s.Answer, body
	ha, hb := s.AnswerHeaderLength, headerLength
	if ia, ib := leadingID(a), leadingID(b); ia > 0 && ib > 0 {
		// The ids are in the JSON header, whose length says where the
		// binary blocks start.
		a, b, ha, hb = a[ia:], b[ib:], ha-ia, hb-ib
		if s.AnswerHeaderLength < 0 || headerLength < 0 {
			ha, hb = s.AnswerHeaderLength, headerLength
		}
	}
	return ha == hb && string(a) == string(b)
}

// idPrefix is how Triton and KServe begin an answer with an id.
const idPrefix = `{"id":"`

// leadingID is the length of an answer's leading `{"id":"…"` (its id a
// string without escapes), or 0 when it has none of that form.
func leadingID(b []byte) int {
	if !bytes.HasPrefix(b, []byte(idPrefix)) {
		return 0
	}
	for i := len(idPrefix); i < len(b); i++ {
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			return 0
		}
		if b[i] < 0x20 {
			return 0
		}
	}
	return 0
}
