package shadow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/internal/http1"
	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxBytes     = 64 << 20
	DefaultTimeout      = 30 * time.Second
	DefaultLogMaxBytes  = 64 << 20
	DefaultLogPerSecond = 10
	DefaultMaxBodyBytes = 64 << 20
)

// KindTFServing is the model-map server kind of a TF Serving server: a
// copy goes to it as the TF REST request the client sent. Every other
// kind is a v2 server's.
const KindTFServing = "tfserving"

// Backend is what the engine needs of a v2 server's control API;
// *backend.Client implements it (as session.Backend does).
type Backend interface {
	Kind(ctx context.Context) (oip.ServerKind, error)
	Signature(ctx context.Context, r route.Route) (*tensor.Signature, error)
}

// tokenSource is implemented by backends that carry a bearer token.
type tokenSource interface {
	BearerToken() (string, error)
}

// Options configure an Engine.
type Options struct {
	Metrics *observe.Metrics
	// Logger receives the mismatch lines and the log files' failures;
	// nil discards.
	Logger *slog.Logger
	// Transport makes the calls to https shadow servers; nil uses a
	// fresh http.Transport. Plain-http servers are reached with the
	// engine's own client (direct.go), which dials them directly (no proxy,
	// no custom dialer), unless Transport is not an *http.Transport: such
	// a RoundTripper (a wrapper, a test's fault injector) makes every
	// call.
	Transport http.RoundTripper
	// DefaultURL is the root URL of the default server (--backend), for
	// a shadow on server "default".
	DefaultURL *url.URL
	// MaxBytes caps the memory all shadow copies hold at once: request
	// bodies, both answers and the v2 request (--shadow-max-bytes). A
	// copy that does not fit is dropped and counted.
	MaxBytes int64
	// MaxBodyBytes bounds a shadow server's answer, like the primary's.
	MaxBodyBytes int64
	// Limits bound the translation of a copy, as the primary's.
	Limits tensor.Limits
	// Timeout bounds one copy's call to its shadow server
	// (--shadow-timeout): a stalled shadow holds its max_inflight slot no
	// longer.
	Timeout time.Duration
	// LogMaxBytes caps each mismatch_log file (--shadow-log-max-bytes):
	// once it is that large, mismatches are only counted and logged.
	LogMaxBytes int64
	// LogPerSecond bounds the lines written to each mismatch_log file
	// per second (--shadow-log-rate), with bursts of as many.
	LogPerSecond float64
}

// Target is the server a copy goes to.
type Target struct {
	// Name is the server's model-map name ("default" for --backend).
	Name string
	// Kind is the map's kind of the server: KindTFServing, or a v2 kind.
	Kind string
	// URL is the server's root URL; nil for the default server.
	URL *url.URL
	// Backend is the server's control client: for a v2 server its kind
	// and signatures; for any server its bearer token, when it has one.
	Backend Backend
}

// Copy is one sampled exchange, handed to Submit when the primary has
// answered. Its byte slices are the engine's from then on.
type Copy struct {
	RequestID string
	// Path is the TF request path as the client sent it.
	Path string
	// Route is the TF route, its label resolved by the map.
	Route route.Route
	// Entry is the model's map entry (its shadow block and signatures).
	Entry *modelmap.Model
	// Target is where the copy goes.
	Target Target
	// Request is the TF request body, identity-encoded.
	Request []byte
	// Primary is the primary's TF answer as the client got it.
	Primary tfcompare.Answer
	// Sent, when not nil, is the primary's v2 request and answer, which
	// the copy reuses where its own would be the same bytes (sent.go).
	// Their bytes are counted in Reserved.
	Sent *Sent
	// Reserved is what the copy holds of the memory cap (Reserve).
	Reserved int64
	// Recycle, when not nil, is called once the engine no longer refers
	// to the copy nor to its bytes (Request, Primary.Body, Sent and its
	// Answer), after it ran or was dropped, so that the submitter may
	// reuse them. It is not called when something may still read them:
	// net/http may write a request body after its RoundTrip returned
	// (lent); the collector frees them then.
	Recycle func()

	model    *modelState // its model's in-flight count and series, set by Submit
	deadline time.Time   // when its --shadow-timeout ends, set as it starts
	lent     bool        // its bytes went to net/http, which may still read them
}

// recycle gives c back to its submitter, unless net/http may still read
// its bytes. c is not touched after.
func (c *Copy) recycle() {
	if r := c.Recycle; r != nil && !c.lent {
		r()
	}
}

// Engine runs shadow copies. It is safe for concurrent use; a nil
// *Engine samples nothing.
type Engine struct {
	o       Options
	metrics *observe.ShadowMetrics
	log     *slog.Logger
	limiter *observe.LogLimiter
	rt      http.RoundTripper
	// conns are the engine's own client's connections, for servers
	// reached over plain http (direct.go); nil when an injected
	// RoundTripper is to see every call.
	conns *http1.Client

	held   atomic.Int64 // bytes all copies hold
	models sync.Map     // model → *modelState
	logs   sync.Map     // path → *mismatchLog
	// work hands a copy to an idle worker (unbuffered: a send succeeds
	// only when one is waiting). Workers outlive their copy by
	// workerIdle, so a steady stream of copies reuses their goroutines
	// and grown stacks instead of growing a new stack per copy.
	work chan *Copy

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns an engine with o's zero fields defaulted.
func New(o Options) *Engine {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.LogMaxBytes <= 0 {
		o.LogMaxBytes = DefaultLogMaxBytes
	}
	if o.LogPerSecond <= 0 {
		o.LogPerSecond = DefaultLogPerSecond
	}
	// Plain-http servers are reached with the engine's own client
	// unless the transport injected is not net/http's (a wrapper, such
	// as a test's fault injector, sees every call).
	_, std := o.Transport.(*http.Transport)
	direct := o.Transport == nil || std
	if o.Transport == nil {
		o.Transport = &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		o: o, metrics: o.Metrics.Shadow(), log: log,
		limiter: &observe.LogLimiter{Logger: log, Interval: 10 * time.Second},
		// The transport itself, not an http.Client: a copy goes to the
		// configured server and nowhere else (a redirect is its answer),
		// and a Client would clone every request's header and set up its
		// redirect and timeout handling for nothing.
		rt: o.Transport,
	}
	if direct {
		e.conns = newClient()
	}
	e.work = make(chan *Copy)
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e
}

// Close stops the copies running (their calls are cancelled, nothing is
// counted for them) and waits for them, then closes the mismatch logs.
func (e *Engine) Close() {
	if e == nil {
		return
	}
	e.cancel()
	if e.conns != nil {
		e.conns.Close() // the copies' reads and writes fail at once
	}
	e.wg.Wait()
	e.logs.Range(func(_, v any) bool {
		v.(*mismatchLog).close()
		return true
	})
}

// Sample reports whether an exchange of a model with shadow block sh is
// copied: a draw against sh.Sample.
func (e *Engine) Sample(sh *modelmap.Shadow) bool {
	if e == nil || sh == nil || sh.Sample <= 0 {
		return false
	}
	return sh.Sample >= 1 || rand.Float64() < sh.Sample
}

// Reserve counts n more bytes of a copy against the memory cap; false
// when they do not fit (nothing is counted then).
func (e *Engine) Reserve(n int64) bool {
	for {
		held := e.held.Load()
		if held+n > e.o.MaxBytes {
			return false
		}
		if e.held.CompareAndSwap(held, held+n) {
			return true
		}
	}
}

// Release returns n bytes to the memory cap.
func (e *Engine) Release(n int64) { e.held.Add(-n) }

// Held returns the bytes all copies hold now.
func (e *Engine) Held() int64 { return e.held.Load() }

// Drop counts a sampled copy of model that was not sent (it outgrew the
// memory cap), releasing reserved bytes.
func (e *Engine) Drop(model string, reserved int64) { e.drop(e.model(model), reserved) }

// drop is Drop on the model's state, its series resolved once.
func (e *Engine) drop(st *modelState, reserved int64) {
	e.Release(reserved)
	st.metrics.Comparison(observe.ShadowDropped)
}

// Submit runs c in the background, or drops it when max_inflight copies
// of its model are running. It never blocks.
func (e *Engine) Submit(c *Copy) {
	sh := c.Entry.Shadow
	st := e.model(c.Route.Model)
	if n := st.inflight.Add(1); n > int64(sh.MaxInflight) {
		st.inflight.Add(-1)
		e.drop(st, c.Reserved)
		c.recycle()
		return
	}
	c.model = st
	select {
	case e.work <- c:
	default:
		e.wg.Add(1)
		go e.worker(c)
	}
}

// workerIdle is how long a worker waits for its next copy before it
// ends.
const workerIdle = 5 * time.Second

// worker runs c, then the copies handed to it while it is idle, until
// none comes for workerIdle or the engine closes.
func (e *Engine) worker(c *Copy) {
	defer e.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	w := e.newScratch()
	defer w.close()
	for {
		e.runWithin(w, c)
		e.Release(c.Reserved)
		c.model.inflight.Add(-1)
		c.recycle()
		idle.Reset(workerIdle)
		select {
		case c = <-e.work:
		case <-idle.C:
			return
		case <-e.ctx.Done():
			return
		}
	}
}

// modelState is what the engine keeps per model: its copies in flight,
// and its series with their labels resolved (a copy's result is counted
// without a label look-up).
type modelState struct {
	inflight atomic.Int64
	metrics  *observe.ShadowModel
	sig      sigSlot    // its last TF signature (scratch.go)
	layout   layoutSlot // its last binary answer's layout (outputs.go)
}

// model is a model's state, made on its first copy.
func (e *Engine) model(model string) *modelState {
	if v, ok := e.models.Load(model); ok {
		return v.(*modelState)
	}
	v, _ := e.models.LoadOrStore(model, &modelState{metrics: e.metrics.Model(model)})
	return v.(*modelState)
}

// run sends one copy and compares the answers, within a deadline of its
// own (tests; the workers reuse theirs).
func (e *Engine) run(c *Copy) {
	w := e.newScratch()
	defer w.close()
	e.runWithin(w, c)
	c.recycle()
}

// runWithin sends one copy within the next of w's timeouts and compares
// the answers.
func (e *Engine) runWithin(w *scratch, c *Copy) {
	ctx := w.dl.start()
	defer w.dl.stop()
	c.deadline = w.dl.end
	model := c.Route.Model
	if c.model == nil { // a copy run without Submit (tests)
		c.model = e.model(model)
	}
	m := c.model.metrics
	answer, res, err := e.call(ctx, w, c)
	if e.ctx.Err() != nil {
		return // shutting down: not the shadow's failure
	}
	if errors.Is(err, errOverCap) {
		m.Comparison(observe.ShadowDropped)
		return
	}
	if err != nil {
		m.Comparison(observe.ShadowError)
		e.limiter.Log(slog.LevelWarn, "shadow_error:"+model, "shadow copy failed",
			"model", model, "server", c.Target.Name, "request_id", c.RequestID, "error", err.Error())
		return
	}
	if res == nil && answer.Status == c.Primary.Status && bytes.Equal(answer.Body, c.Primary.Body) {
		// The same bytes (most copies of a faithful shadow): a match
		// without parsing either answer. A 2xx answer's numeric outputs,
		// if any, differ by nothing.
		if answer.Status >= 200 && answer.Status <= 299 {
			m.WorstRelative(0)
		}
		m.Comparison(observe.ShadowMatch)
		return
	}
	if res == nil { // not compared on the answers' outputs (a match if it was)
		res = w.comparer(c).Compare(c.Primary, answer)
	}
	if w, ok := worstRelative(res); ok {
		m.WorstRelative(w)
	}
	if res.Verdict != tfcompare.Mismatch {
		m.Comparison(observe.ShadowMatch)
		return
	}
	rec := newRecord(c, answer, res)
	e.limiter.Log(slog.LevelWarn, "mismatch:"+model, "shadow mismatch", rec.logAttrs()...)
	if sh := c.Entry.Shadow; sh.MismatchLog != "" {
		e.logFile(sh.MismatchLog).write(rec)
	}
	// Counted last: whoever sees the count finds the line written.
	m.Comparison(observe.ShadowMismatch)
}

// worstRelative is the largest relative error of a result's numeric
// outputs; ok is false when no output was compared element by element.
func worstRelative(r *tfcompare.Result) (float64, bool) {
	worst, ok := 0.0, false
	for i := range r.Outputs {
		o := &r.Outputs[i]
		if o.Elements == 0 || !o.InA || !o.InB {
			continue
		}
		ok = true
		worst = math.Max(worst, o.MaxRel)
	}
	return worst, ok
}

// logFile returns the mismatch log at path, opened on first use.
func (e *Engine) logFile(path string) *mismatchLog {
	if v, ok := e.logs.Load(path); ok {
		return v.(*mismatchLog)
	}
	v, _ := e.logs.LoadOrStore(path, newMismatchLog(path, e.o.LogMaxBytes, e.o.LogPerSecond, e.log))
	return v.(*mismatchLog)
}

// errTimeout is the cause of a copy's context cancelled by its deadline.
var errTimeout = fmt.Errorf("no answer within the shadow timeout (--shadow-timeout): %w", context.DeadlineExceeded)

// deadline is a worker's --shadow-timeout, one copy at a time. Its
// context and timer are reused from copy to copy, where a
// context.WithTimeout per copy would allocate a context, a timer and a
// channel and register and unregister them with the engine's context;
// only a copy that times out costs the next one a new context.
type deadline struct {
	parent context.Context
	limit  time.Duration
	ctx    context.Context // nil until the first copy and after a timeout
	cancel context.CancelCauseFunc
	timer  *time.Timer // cancels ctx with errTimeout when it fires
	end    time.Time   // when the current copy's time ends
}

func (e *Engine) newDeadline() *deadline { return &deadline{parent: e.ctx, limit: e.o.Timeout} }

// start returns the context of the next copy: done limit from now, or
// when the engine closes.
func (d *deadline) start() context.Context {
	d.end = time.Now().Add(d.limit)
	if d.ctx != nil {
		d.timer.Reset(d.limit)
		return d.ctx
	}
	ctx, cancel := context.WithCancelCause(d.parent)
	d.ctx, d.cancel = ctx, cancel
	d.timer = time.AfterFunc(d.limit, func() { cancel(errTimeout) })
	return ctx
}

// stop ends the copy's time. A timer that already fired (or is firing)
// has cancelled the context, or is about to: the next copy gets a new
// one.
func (d *deadline) stop() {
	if d.ctx != nil && !d.timer.Stop() {
		d.cancel(errTimeout)
		d.ctx = nil
	}
}

// close lets the context go (the worker ends).
func (d *deadline) close() {
	if d.ctx != nil {
		d.timer.Stop()
		d.cancel(context.Canceled)
		d.ctx = nil
	}
}
