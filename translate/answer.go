package translate

import (
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// Answer is a translated TF body handed over where it was written
// (Pipeline.ResponseParts): its Parts, in order, are the body, in pooled
// memory that Release returns. It saves Response's copy of the whole text
// for a transport that can write the parts as they lie.
//
// Release must be called exactly once, after the parts have been written
// (for a transport that sends them later than its call returns, when it
// is done with them), and the parts are not read afterwards. An Answer
// is used by one goroutine at a time; copies of it share its parts.
type Answer struct {
	parts [][]byte
	n     int
	body  *tfresponse.Body
}

// Parts returns the body's parts, in order. They are valid until Release.
func (a *Answer) Parts() [][]byte { return a.parts }

// Len returns the body's length in bytes (its Content-Length).
func (a *Answer) Len() int { return a.n }

// AppendTo appends the whole body to dst (a copy, for the callers that
// need the body as one slice of their own).
func (a *Answer) AppendTo(dst []byte) []byte {
	for _, p := range a.parts {
		dst = append(dst, p...)
	}
	return dst
}

// Release returns the parts' memory to the pool; the Answer is empty
// afterwards (a second Release of the same variable does nothing).
func (a *Answer) Release() {
	if b := a.body; b != nil {
		*a = Answer{}
		b.Release()
	}
}

// ResponseParts is Response with the TF body handed over in place, as an
// Answer, instead of copied into a fresh slice: the same checks, errors
// and bytes. On error there is nothing to release.
func (p Pipeline) ResponseParts(v2Body []byte, headerLength int, ex Exchange, lim tensor.Limits) (Answer, error) {
	b, err := p.body(v2Body, headerLength, ex, lim)
	if err != nil {
		return Answer{}, err
	}
	parts := b.Pieces()
	n := 0
	for _, q := range parts {
		n += len(q)
	}
	return Answer{parts: parts, n: n, body: b}, nil
}
