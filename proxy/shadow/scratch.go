package shadow

import (
	"context"
	"sync/atomic"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
)

// scratch is what a worker reuses from copy to copy, so that a copy
// allocates only what its result keeps: its deadline, the buffer a v2
// server's answer is read into (translated, then no longer needed), and
// its signature resolver (a closure made per copy would be allocated
// with the route it fills in).
type scratch struct {
	dl   *deadline
	body []byte // a v2 answer's bytes; kept up to maxScratchBody
	res  resolver
	cmp  *tfcompare.Comparer // made on first use
	outs [2][]tensor.Tensor  // the two answers' outputs (compareOutputs)
}

// comparer is the worker's Comparer, with c's model's tolerance.
func (w *scratch) comparer(c *Copy) *tfcompare.Comparer {
	if w.cmp == nil {
		w.cmp = tfcompare.New(tfcompare.DefaultTolerance)
	}
	sh := c.Entry.Shadow
	w.cmp.Tolerance = tfcompare.Tolerance{Abs: sh.Abs, Rel: sh.Rel}
	return w.cmp
}

// maxScratchBody is the largest answer buffer a worker keeps for its
// next copy: a larger answer's buffer goes with its copy, so that an idle
// worker holds little.
const maxScratchBody = 64 << 10

func (e *Engine) newScratch() *scratch {
	w := &scratch{dl: e.newDeadline()}
	w.res.fn = w.res.resolve
	return w
}

// close lets the worker's deadline go.
func (w *scratch) close() { w.dl.close() }

// answerBuf returns a buffer of n bytes for a v2 answer: the worker's
// own when it is large enough (or may grow to n), else a new one.
func (w *scratch) answerBuf(n int) []byte {
	if n > maxScratchBody {
		return make([]byte, n)
	}
	if cap(w.body) < n {
		w.body = make([]byte, n, max(n, 4<<10))
	}
	return w.body[:n]
}

// resolver is translate's signature lookup for one copy at a time: the
// map entry's signature by name, the shadow server's metadata for its v2
// model, and the two made into the TF signature (remembered per model
// while neither changes). wire is the v2 route the lookup fills in.
type resolver struct {
	ctx  context.Context
	c    *Copy
	be   Backend
	wire route.Route
	fn   func(string) (*tensor.Signature, error) // resolve, bound once per worker
}

// reset readies r for c, sent to be.
func (r *resolver) reset(ctx context.Context, c *Copy, be Backend) {
	r.ctx, r.c, r.be = ctx, c, be
	r.wire = c.Route
	r.wire.Label = ""
}

// done lets the copy go (a worker may idle for a while).
func (r *resolver) done() { r.ctx, r.c, r.be = nil, nil, nil }

func (r *resolver) resolve(name string) (*tensor.Signature, error) {
	c := r.c
	ms, ok := c.Entry.Signature(name)
	if !ok {
		return nil, unknownSignature(c.Route.Verb, name)
	}
	r.wire.Model = ms.Model
	sig, err := r.be.Signature(r.ctx, r.wire)
	if err != nil {
		if ae := apierr.As(err); ae.Code == apierr.NotFound || ms.Metadata == nil {
			return nil, tfNotFound(c.Route, err)
		}
		sig = nil // the map's metadata stands in
	}
	return c.model.tfSignature(ms, sig, c.Route.Model), nil
}

// sigMemo is a model's last TF signature and what it was made of.
type sigMemo struct {
	ms    *modelmap.Signature
	wire  *tensor.Signature
	model string
	tf    *tensor.Signature
}

// tfSignature is ms.TFSignature(wire, model), made again only when the
// map entry's signature or the server's (a new backend cache entry)
// changed. Signatures are read-only once made (the backend's cache
// shares them between exchanges too).
func (st *modelState) tfSignature(ms *modelmap.Signature, wire *tensor.Signature, model string) *tensor.Signature {
	if m := st.sig.Load(); m != nil && m.ms == ms && m.wire == wire && m.model == model {
		return m.tf
	}
	tf := ms.TFSignature(wire, model)
	st.sig.Store(&sigMemo{ms: ms, wire: wire, model: model, tf: tf})
	return tf
}

// sigSlot is modelState's memo field.
type sigSlot = atomic.Pointer[sigMemo]
