package bridge

import (
	"context"
	"sync"

	"github.com/tfsbridge/tfsbridge/proxy/tlsconfig"
)

// Reloads carries "reload now" requests — SIGHUP, for cmd/tfsbridge — to
// every bridge serving in the process. A process may run several bridges
// (the demo), so each Serve subscribes and every one of them reloads.
type Reloads struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// NewReloads returns a Reloads nobody listens to yet.
func NewReloads() *Reloads { return &Reloads{subs: map[chan struct{}]struct{}{}} }

// Notify asks every serving bridge to reload. It never blocks: requests
// that arrive while a reload is pending are merged into it.
func (r *Reloads) Notify() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ch := range r.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (r *Reloads) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	r.subs[ch] = struct{}{}
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		delete(r.subs, ch)
		r.mu.Unlock()
	}
}

type reloadsKey struct{}

// WithReloads returns a context that makes Serve reload on r's requests.
// It travels in the context because the command line hands its context
// to every command, serving or not, while only serving ones have a
// bridge.
func WithReloads(ctx context.Context, r *Reloads) context.Context {
	return context.WithValue(ctx, reloadsKey{}, r)
}

func reloadsFrom(ctx context.Context) *Reloads {
	r, _ := ctx.Value(reloadsKey{}).(*Reloads)
	return r
}

// serveReloads reloads on every request of ctx's Reloads until stop is
// done; without Reloads it returns at once.
func (b *Bridge) serveReloads(ctx, stop context.Context) {
	r := reloadsFrom(ctx)
	if r == nil {
		return
	}
	ch, cancel := r.subscribe()
	defer cancel()
	for {
		select {
		case <-stop.Done():
			return
		case <-ch:
			b.Reload()
		}
	}
}

// Reload re-reads now what tfsbridge otherwise re-reads when it sees a
// change: the model map (--model-map) and the TLS key pairs of the
// ext_proc server and of the backend client. What fails to load keeps the
// previous value in force, as a failed periodic reload does, and is
// logged (and counted) the same way.
func (b *Bridge) Reload() {
	b.Log.Info("reload requested (SIGHUP): re-reading the model map and TLS certificates",
		"model_map", b.opts.ModelMapFile, "tls_pairs", len(b.extprocTLS.Pairs())+len(b.backendTLS.Pairs()))
	if b.maps != nil {
		b.maps.watcher.Poll()
	}
	for _, l := range []*tlsconfig.Loaded{b.extprocTLS, b.backendTLS} {
		_ = l.Reload() // logged and counted by the key pair's events
	}
}
