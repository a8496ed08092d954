package shadow

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
)

// inferTap records the last inference request body a v2 server got, and
// its answer's body and Inference-Header-Content-Length.
type inferTap struct {
	// first: only the first call is recorded (the others pass as they
	// would without the tap).
	first              bool
	mu                 sync.Mutex
	request, answer    []byte
	answerHeaderLength int
}

func (tp *inferTap) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.mu.Lock()
		done := tp.first && tp.request != nil
		tp.mu.Unlock()
		if done || !bytes.HasSuffix([]byte(r.URL.Path), []byte("/infer")) {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		hl := -1
		if v := w.Header().Get("Inference-Header-Content-Length"); v != "" {
			hl, _ = strconv.Atoi(v)
		}
		tp.mu.Lock()
		tp.request, tp.answer, tp.answerHeaderLength = body, rec.body.Bytes(), hl
		tp.mu.Unlock()
	})
}

type recorder struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// probeSent sends one copy of the predict request, without Sent, to a
// faithful v2 server (the mock behind a tap; with replayed, answering
// every later inference call with its first answer) and returns a
// worker's scratch (closed with the test), that copy, its server, and the
// Sent the copy's exchange makes: the primary's v2 request and answer as
// the session hands them over.
func probeSent(t testing.TB, h *harness, replayed bool) (*scratch, *Copy, Target, *Sent) {
	t.Helper()
	tap := &inferTap{first: true}
	wrap := tap.wrap
	if replayed {
		wrap = func(next http.Handler) http.Handler { return tap.wrap(replay(next)) }
	}
	target := v2Target(t, 0, wrap)
	w := h.e.newScratch()
	t.Cleanup(w.close)
	probe := h.copyOf(target, predictPath, predictBody, ok(primaryOK))
	h.e.runWithin(w, probe)
	h.e.Release(probe.Reserved)
	return w, probe, target, sentOf(t, h, w, target, tap)
}

// sentOf is the Sent of the last copy tap saw (its request and answer,
// after a copy without Sent to target).
func sentOf(t testing.TB, h *harness, w *scratch, target Target, tap *inferTap) *Sent {
	t.Helper()
	c := h.copyOf(target, predictPath, predictBody, ok(primaryOK))
	c.model = h.e.model(c.Route.Model)
	w.res.reset(context.Background(), c, target.Backend)
	defer w.res.done()
	sig, err := w.res.fn("")
	h.e.Release(c.Reserved)
	if err != nil {
		t.Fatal(err)
	}
	opt := translate.RequestOptions{Kind: oip.Triton, ID: "rid", Limits: h.e.o.Limits, MaxBytes: h.e.o.MaxBodyBytes}
	tp, _ := translate.For(route.Predict)
	req, ex, err := tp.Request([]byte(predictBody), func(string) (*tensor.Signature, error) { return sig, nil }, opt)
	if err != nil {
		t.Fatal(err)
	}
	tap.mu.Lock()
	defer tap.mu.Unlock()
	if !bytes.Equal(req.Body, tap.request) {
		t.Fatalf("the request translated again is %q, the copy sent %q", req.Body, tap.request)
	}
	return &Sent{Body: req.Chunks(), ContentType: req.ContentType, HeaderLength: req.HeaderLength, Options: opt, Exchange: ex,
		Answer: bytes.Clone(tap.answer), AnswerHeaderLength: tap.answerHeaderLength, AnswerLimits: h.e.o.Limits}
}

// TestEngineReusesSent: a copy to a server of the primary's kind and
// signature sends the primary's v2 request as it is, and an answer that
// is the primary's v2 answer (but for its id) is a match without being
// translated; anything else translates, as without Sent.
func TestEngineReusesSent(t *testing.T) {
	h := newHarness(t, Options{}, 8)
	tap := &inferTap{}
	target := v2Target(t, 0, tap.wrap)
	// The primary's translation, for the id "sent": told apart from the
	// engine's own (id "rid") by what the server gets.
	w := h.e.newScratch()
	defer w.close()
	probe := h.copyOf(target, predictPath, predictBody, ok(primaryOK))
	probe.model = h.e.model(probe.Route.Model)
	w.res.reset(context.Background(), probe, target.Backend)
	sig, err := w.res.fn("")
	h.e.Release(probe.Reserved)
	if err != nil {
		t.Fatal(err)
	}
	opt := translate.RequestOptions{Kind: oip.Triton, ID: "rid", Limits: h.e.o.Limits, MaxBytes: h.e.o.MaxBodyBytes}
	sentOpt := opt
	sentOpt.ID = "sent"
	tp, _ := translate.For(route.Predict)
	req, ex, err := tp.Request([]byte(predictBody), func(string) (*tensor.Signature, error) { return sig, nil }, sentOpt)
	if err != nil {
		t.Fatal(err)
	}
	run := func(s *Sent, primary tfcompare.Answer) (request string, results map[string]int) {
		t.Helper()
		before := map[string]int{}
		for _, r := range []string{observe.ShadowMatch, observe.ShadowMismatch, observe.ShadowError} {
			before[r] = h.count(r)
		}
		c := h.copyOf(target, predictPath, predictBody, primary)
		c.Sent = s
		h.e.runWithin(w, c)
		h.e.Release(c.Reserved)
		results = map[string]int{}
		for r, n := range before {
			if d := h.count(r) - n; d > 0 {
				results[r] = d
			}
		}
		tap.mu.Lock()
		defer tap.mu.Unlock()
		return string(tap.request), results
	}
	released := 0
	sent := func(edit func(*Sent)) *Sent {
		s := &Sent{Body: req.Chunks(), ContentType: req.ContentType, HeaderLength: req.HeaderLength, Options: opt, Exchange: ex, AnswerHeaderLength: -1,
			Release: func() { released++ }}
		if edit != nil {
			edit(s)
		}
		return s
	}
	// The engine's own translation, and the v2 answer to it (id "rid").
	own, res := run(nil, ok(primaryOK))
	if res[observe.ShadowMatch] != 1 || !bytes.Contains([]byte(own), []byte(`"id":"rid"`)) {
		t.Fatalf("without Sent: %v, request %s", res, own)
	}
	tap.mu.Lock()
	answer, answerHL := bytes.Clone(tap.answer), tap.answerHeaderLength
	tap.mu.Unlock()
	otherSig := *sig
	otherSig.Outputs = append([]tensor.Spec(nil), sig.Outputs...)
	otherSig.Outputs[0].Name += "_other"
	// The primary's v2 answer with another id, and one with another value.
	sameButID, idHL := bytes.Replace(answer, []byte(`"id":"rid"`), []byte(`"id":"sent-1"`), 1), answerHL
	if idHL >= 0 {
		idHL += len("sent-1") - len("rid") // the id is in the JSON header
	}
	changed := bytes.Clone(answer)
	if answerHL >= 0 {
		changed[len(changed)-1] ^= 0x01 // the last value of the binary block
		changed[len(changed)-2] ^= 0x40
	} else {
		changed = bytes.Replace(answer, []byte("2.5"), []byte("2.6"), 1)
	}
	otherLimits := h.e.o.Limits
	otherLimits.MaxDepth++
	const marker = `{"predictions": "the primary's TF answer"}`
	for _, tc := range []struct {
		name    string
		sent    *Sent
		primary tfcompare.Answer
		reused  bool
		result  string
	}{
		{"same kind and signature", sent(nil), ok(primaryOK), true, observe.ShadowMatch},
		{"another kind", sent(func(s *Sent) { s.Options.Kind = oip.KServe }), ok(primaryOK), false, observe.ShadowMatch},
		{"another id", sent(func(s *Sent) { s.Options.ID = "x" }), ok(primaryOK), false, observe.ShadowMatch},
		{"another signature", sent(func(s *Sent) { s.Exchange.Signature = &otherSig }), ok(primaryOK), false, observe.ShadowMatch},
		// The answer is not translated: the primary's TF answer stands
		// for it, whatever its bytes.
		{"the primary's v2 answer", sent(func(s *Sent) { s.Answer, s.AnswerHeaderLength, s.AnswerLimits = answer, answerHL, h.e.o.Limits }), ok(marker), true, observe.ShadowMatch},
		{"the primary's v2 answer but its id", sent(func(s *Sent) { s.Answer, s.AnswerHeaderLength, s.AnswerLimits = sameButID, idHL, h.e.o.Limits }), ok(marker), true, observe.ShadowMatch},
		{"another v2 answer", sent(func(s *Sent) { s.Answer, s.AnswerHeaderLength, s.AnswerLimits = changed, answerHL, h.e.o.Limits }), ok(marker), true, observe.ShadowMismatch},
		{"other answer limits", sent(func(s *Sent) { s.Answer, s.AnswerHeaderLength, s.AnswerLimits = answer, answerHL, otherLimits }), ok(marker), true, observe.ShadowMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			released = 0
			got, res := run(tc.sent, tc.primary)
			if released != 1 {
				t.Errorf("the copy's share of the request released %d times, want once", released)
			}
			if reused := bytes.Contains([]byte(got), []byte(`"id":"sent"`)); reused != tc.reused {
				t.Errorf("request sent %s: reused %v, want %v", got, reused, tc.reused)
			}
			if len(res) != 1 || res[tc.result] != 1 {
				t.Errorf("results %v, want one %s", res, tc.result)
			}
		})
	}
}

func TestLeadingID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`{"id":"abc","model_name":"m"}`, len(`{"id":"abc"`)},
		{`{"id":"","model_name":"m"}`, len(`{"id":""`)},
		{`{"id":"a\"b","model_name":"m"}`, 0},
		{`{"id":"abc`, 0},
		{`{"model_name":"m","id":"abc"}`, 0},
		{`{ "id":"abc"}`, 0},
		{"{\"id\":\"a\nb\"}", 0},
	} {
		if got := leadingID([]byte(tc.in)); got != tc.want {
			t.Errorf("leadingID(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// A shared release runs once both holders are done, whichever is last.
func TestSharedRelease(t *testing.T) {
	for _, order := range []string{"adapter first", "copy first"} {
		n := 0
		r := NewSharedRelease(func() { n++ })
		adapter, copier := r.Done, (&Sent{Release: r.Done}).takeRelease()
		if order == "copy first" {
			adapter, copier = copier, adapter
		}
		adapter()
		if n != 0 {
			t.Fatalf("%s: released after one holder", order)
		}
		copier()
		if n != 1 {
			t.Fatalf("%s: released %d times after both, want once", order, n)
		}
	}
	if (&Sent{}).takeRelease() != nil || (*Sent)(nil).takeRelease() != nil {
		t.Error("takeRelease of no release is not nil")
	}
}
