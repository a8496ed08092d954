package tfresponse

import (
	"math"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// PieceSize is the most bytes Body.Stream hands over at once: the chunk
// size tfsbridge streams bodies in (ext_proc streamed_response chunks and
// the proxy's writes alike).
const PieceSize = 64 << 10

// Body is one response body (predict, classify or regress) whose checks
// have passed, ready to be written: whole (AppendTo) or
// in pieces as its outputs' data arrives (Stream). Everything TF Serving
// checks before it writes was checked by the constructor (NewPredict,
// NewClassify, NewRegress), so writing cannot fail.
//
// The outputs must be complete in form (shape, datatype, fixed-size Data
// of full length, every BYTES element); a streaming caller fills Data in
// order and reports how far with SetAvailable. Release returns the Body's
// memory to the pool once it is no longer used.
type Body struct {
	sc      *scratch
	outputs []tensor.Tensor
	avail   []int64 // elements of each output whose data is in place
	walk    walker
	bound   int64 // the body's size bound when known, to size a whole-body buffer
	begun   bool  // the writer has been reset for streaming
	done    bool
}

// walker writes one kind of body, resumably.
type walker interface {
	// step writes until the body is complete (true), or until the data
	// available runs out or the writer holds limit bytes (false).
	step(b *Body, limit int) bool
}

// newBody returns the Body of sc (pooled with it, so a whole-body
// translation allocates no Body of its own).
func newBody(sc *scratch, outputs []tensor.Tensor, walk walker, bound int64) *Body {
	b := &sc.body
	*b = Body{sc: sc, outputs: outputs, walk: walk, bound: bound, avail: b.avail[:0]}
	for i := range outputs {
		b.avail = append(b.avail, elements(&outputs[i]))
	}
	return b
}

// elements is t's element count (checked by the constructors).
func elements(t *tensor.Tensor) int64 {
	n, _ := tensor.NumElements(t.Shape)
	return n
}

// SetAvailable records that the first n elements of output i (of the
// slice the Body was made from) hold their data. A Body starts with every
// element available; a streaming caller sets 0 for the outputs whose data
// is still to come, then raises it as it arrives. It never decreases.
func (b *Body) SetAvailable(i int, n int64) { b.avail[i] = n }

// Done reports that the whole body has been written.
func (b *Body) Done() bool { return b.done }

// Stream writes as much of the body as the available data allows, handing
// it to out in order in pieces of PieceSize bytes; the last piece, shorter,
// once the body is complete. Less than a piece stays buffered in between.
// out may reuse the slice after it returns; an error from out is returned
// as is and leaves the Body unusable.
func (b *Body) Stream(out func([]byte) error) error {
	w := b.sc.w
	if !b.begun {
		b.begun = true
		if cap(b.sc.buf) < 2*PieceSize {
			b.sc.buf = make([]byte, 0, 2*PieceSize)
		}
		w.Reset(b.sc.buf[:0])
	}
	for !b.done {
		b.done = b.walk.step(b, PieceSize)
		buf := w.Bytes()
		full := len(buf) >= PieceSize
		n := 0
		for ; len(buf)-n >= PieceSize || (b.done && n < len(buf)); n += PieceSize {
			piece := buf[n:min(n+PieceSize, len(buf))]
			if err := out(piece); err != nil {
				return err
			}
		}
		w.Discard(min(n, len(buf)))
		if !full && !b.done {
			return nil // the data ran out
		}
	}
	return nil
}

// AppendTo writes the whole body (every output available) and appends it
// to dst; it is for a Body that has not streamed. The body is written into
// the pooled buffer, sized from the bound, and copied out once, so the
// caller's buffer grows exactly once. A caller that can send the body where
// it lies uses Pieces instead, which skips the copy.
func (b *Body) AppendTo(dst []byte) []byte {
	sc := b.sc
	b.writeWhole()
	if dst == nil && cap(sc.buf) > maxPooledBuffer {
		// A buffer too large for the pool is handed over when the body
		// fills two thirds of it or more, rather than copied (the copy
		// would double the exchange's peak), else copied out so that the
		// bound's slack is not held while the answer is sent.
		out := sc.buf
		sc.buf = nil
		if cap(out)-len(out) > len(out)/2 {
			out = append([]byte(nil), out...)
		}
		return out
	}
	return append(dst, sc.buf...)
}

// Pieces writes the whole body (every output available) and returns it
// where it was written, in order: the Body's pooled memory, not a copy
// (a body this size is ~12% of its translation's CPU in the copy alone).
// It is for a Body that has not streamed. The pieces belong to the Body:
// they stay valid until Release, which the caller calls once, after the
// pieces have been written out (a transport that sends them later must
// hold the release until then), and never reads them afterwards.
func (b *Body) Pieces() [][]byte {
	b.writeWhole()
	sc := b.sc
	sc.pieces[0] = sc.buf
	return sc.pieces[:]
}

// writeWhole writes the whole body into the pooled buffer, sc.buf.
func (b *Body) writeWhole() {
	sc := b.sc
	// Start from half the bound: growing by append from a small buffer
	// allocates about five times the final size of a large body (Go grows
	// large slices by 1.25×), all of it live until the next collection,
	// while real bodies take a third to a half of the bound (it assumes the
	// longest value text and full escaping everywhere).
	if hint := b.bound / 2; int64(cap(sc.buf)) < hint {
		sc.buf = make([]byte, 0, hint)
	}
	w := sc.w
	w.Reset(sc.buf[:0])
	b.walk.step(b, math.MaxInt)
	b.done = true
	sc.buf = w.Bytes()
}

// Release returns the Body, and its working memory, to the pool. The Body
// must not be used afterwards.
func (b *Body) Release() {
	if sc := b.sc; sc != nil {
		b.sc = nil
		sc.release() // b lives in sc: it is cleared there
	}
}

// release clears sc, the working memory of a Body, and pools it.
func (sc *scratch) release() {
	if poisonReleased {
		poison(sc.buf[:cap(sc.buf)])
	}
	sc.pieces[0] = nil
	if cap(sc.buf) > maxPooledBuffer {
		sc.buf = nil
	}
	sc.w.Reset(nil)
	// Keep the slices' memory, not the tensors they referred to.
	sc.body = Body{avail: sc.body.avail[:0]}
	sc.predict = predictWalk{cur: cursor{nest: sc.predict.cur.nest}}
	scratchPool.Put(sc)
}
