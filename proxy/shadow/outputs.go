package shadow

import (
	"bytes"
	"slices"
	"sync/atomic"

	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
)

// compareOutputs compares a shadow's 2xx v2 answer with the primary's on
// their outputs (tfcompare.ComparePredict), when the copy sent the
// primary's request (s is the Sent callV2 used) and has the primary's v2
// answer, read with the limits the copy's translation would use: the
// client's TF answer and the shadow's would both be written by the same
// translation from these outputs, so ComparePredict's Result is the one
// Compare gives on the two TF texts, and neither text is written or
// parsed. A converted model's answer mostly takes this way: its values
// drift, its outputs' names, datatypes and shapes are the primary's.
//
// ok is false when the answers are left to the texts: another verb, an
// answer that does not decode (the translation reports it), outputs of
// another form (ComparePredict's rules). The caller also leaves a
// mismatch to the texts, whose comparison the mismatch log records.
func (e *Engine) compareOutputs(w *scratch, c *Copy, s *Sent, body []byte, headerLength int) (*tfcompare.Result, bool) {
	if s == nil || s.Answer == nil || s.AnswerLimits != e.o.Limits || c.Route.Verb != route.Predict {
		return nil, false
	}
	ex, lim := s.Exchange, e.o.Limits
	primary, ok := c.model.outputs(w.outs[0][:0], s.Answer, s.AnswerHeaderLength, ex, lim)
	if !ok {
		return nil, false
	}
	shadow, ok := c.model.outputs(w.outs[1][:0], body, headerLength, ex, lim)
	if !ok {
		return nil, false
	}
	r, ok := w.comparer(c).ComparePredict(tfcompare.Predict{Outputs: primary, Format: ex.Format}, tfcompare.Predict{Outputs: shadow, Format: ex.Format})
	// The result holds no element of theirs: the answers' bytes are not
	// kept alive by a worker waiting for its next copy.
	clear(primary)
	clear(shadow)
	w.outs[0], w.outs[1] = primary[:0], shadow[:0]
	return r, ok
}

// outputs is translate.PredictOutputs of a v2 answer, appended to dst.
// A binary answer whose JSON header, but for its leading id, is the one
// the model's last such answer had (layout) is not decoded again: its
// outputs are the layout's, their data its blocks in place. A copy
// decodes its two answers' headers only while the model's outputs
// change.
func (st *modelState) outputs(dst []tensor.Tensor, body []byte, headerLength int, ex translate.Exchange, lim tensor.Limits) ([]tensor.Tensor, bool) {
	if headerLength <= 0 || headerLength > len(body) {
		out, err := translate.PredictOutputs(body, headerLength, ex, lim)
		return out, err == nil
	}
	header := body[:headerLength]
	rest := header[leadingID(header):]
	l := st.layout.Load()
	if l == nil || !l.fits(rest, ex.Signature, lim) {
		if l = newLayout(header, rest, ex.Signature, lim); l == nil {
			out, err := translate.PredictOutputs(body, headerLength, ex, lim)
			return out, err == nil
		}
		st.layout.Store(l)
	}
	bin := body[headerLength:]
	if len(bin) != l.total {
		// Not what DecodeResponse accepts with this header.
		out, err := translate.PredictOutputs(body, headerLength, ex, lim)
		return out, err == nil
	}
	dst = append(dst, l.outputs...)
	off := 0
	for i, b := range l.blocks {
		if n := int(b.Size); n > 0 {
			dst[i].Data = bin[off : off+n : off+n]
			off += n
		}
	}
	translate.RestoreBatch(dst, ex)
	return dst, true
}

// layout is a binary v2 answer's JSON header decoded
// (oip.DecodeResponseHeader): its outputs without their data, each a
// fixed-size one with its block, in body order, as DecodeResponse places
// them. It is read-only once made.
type layout struct {
	header  []byte // the header after its leading id (a copy)
	sig     *tensor.Signature
	lim     tensor.Limits
	outputs []tensor.Tensor // names and shapes of their own, no data
	blocks  []oip.Block     // blocks[i] is outputs[i]'s
	total   int             // the blocks' bytes
}

// fits reports whether l is the layout of a header that is rest after its
// leading id, decoded with sig and lim.
func (l *layout) fits(rest []byte, sig *tensor.Signature, lim tensor.Limits) bool {
	return l.lim == lim && (l.sig == sig || l.sig.Equal(sig)) && bytes.Equal(l.header, rest)
}

// newLayout decodes header (rest is what follows its leading id), nil
// when it does not decode or some output is not a fixed-size one in a
// block of its own in output order: such answers are decoded whole.
func newLayout(header, rest []byte, sig *tensor.Signature, lim tensor.Limits) *layout {
	h, _, err := oip.DecodeResponseHeader(header, sig, lim)
	if err != nil || len(h.Blocks) != len(h.Outputs) {
		return nil
	}
	l := &layout{header: bytes.Clone(rest), sig: sig, lim: lim, blocks: slices.Clone(h.Blocks)}
	for i, b := range h.Blocks {
		t := h.Outputs[b.Output]
		if b.Output != i || t.DataType == tensor.Bytes {
			return nil
		}
		l.outputs = append(l.outputs, tensor.Tensor{Name: t.Name, DataType: t.DataType, Shape: slices.Clone(t.Shape)})
		l.total += int(b.Size)
	}
	return l
}

// layoutSlot is modelState's layout field.
type layoutSlot = atomic.Pointer[layout]
