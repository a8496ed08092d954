package shadow

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
)

// BenchmarkEngineCopy is one copy's whole run in the engine, as a
// worker does it: the TF request translated for a v2 server, the HTTP
// exchange, the answer translated back and compared with the primary's
// (identical: the faithful shadow's common case). The shadow server
// replays the answer the mock gave the first call, the request drained
// unparsed, so the time is the engine's and net/http's, not a model's.
func BenchmarkEngineCopy(b *testing.B) { benchCopy(b, 0) }

// benchCopy runs copies of the primary's request to a shadow whose
// outputs are off the primary's by drift, without Sent.
func benchCopy(b *testing.B, drift float64) {
	h := newHarness(b, Options{}, 1)
	target := v2Target(b, drift, replay)
	w := h.e.newScratch() // a worker's, reused from copy to copy
	defer w.close()
	runCopies(b, h, w, target, nil, 1)
}

// runCopies times copies to target (with sent, when not nil) and checks
// that every one was a match, and that there were more than before.
func runCopies(b *testing.B, h *harness, w *scratch, target Target, sent *Sent, before int) {
	b.ReportAllocs()
	for b.Loop() {
		c := h.copyOf(target, predictPath, predictBody, ok(primaryOK))
		c.Sent = sent
		h.e.runWithin(w, c)
		h.e.Release(c.Reserved)
	}
	b.StopTimer()
	if got := h.count(observe.ShadowMatch); got < before || h.count(observe.ShadowMismatch)+h.count(observe.ShadowError) != 0 {
		b.Fatalf("%d matches, %d mismatches, %d errors", got, h.count(observe.ShadowMismatch), h.count(observe.ShadowError))
	}
}

// BenchmarkEngineCopySent is BenchmarkEngineCopy for a copy that has the
// primary's v2 request and answer (Sent, as the session hands them over
// when the shadow server is of the primary's kind and signature): the
// request is sent as it is and the faithful answer is matched without
// being translated.
func BenchmarkEngineCopySent(b *testing.B) { benchCopySent(b, 0) }

// benchCopySent runs copies with the primary's Sent (from a faithful
// server) to a shadow whose outputs are off the primary's by drift.
func benchCopySent(b *testing.B, drift float64) {
	h := newHarness(b, Options{}, 1)
	// One copy without Sent: its request and answer are the primary's.
	w, _, target, sent := probeSent(b, h, true)
	if drift != 0 {
		target = v2Target(b, drift, replay)
	}
	runCopies(b, h, w, target, sent, 2)
}

// replay answers every inference call with next's answer to the first.
func replay(next http.Handler) http.Handler {
	var (
		once   sync.Once
		rec    *httptest.ResponseRecorder
		header http.Header
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bytes.HasSuffix([]byte(r.URL.Path), []byte("/infer")) {
			next.ServeHTTP(w, r)
			return
		}
		first := false
		once.Do(func() {
			rec = httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			header = rec.Header().Clone()
			first = true
		})
		if !first {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// BenchmarkEngineCopyDrift is BenchmarkEngineCopy with a shadow whose
// outputs are 1e-6 off the primary's (within tolerance: a match), as a
// converted model's are: the answer is not the primary's bytes, so it is
// compared value by value.
func BenchmarkEngineCopyDrift(b *testing.B) { benchCopy(b, 1e-6) }

// BenchmarkEngineCopySentDrift is BenchmarkEngineCopySent with the
// drifting shadow of BenchmarkEngineCopyDrift: the primary's v2 request
// is sent as it is, and the shadow's answer, not the primary's bytes, is
// compared value by value.
func BenchmarkEngineCopySentDrift(b *testing.B) { benchCopySent(b, 1e-6) }

// BenchmarkCompareDrift is the comparison of BenchmarkEngineCopySentDrift's
// drifting answer alone, without the HTTP exchange, both ways: texts, the
// answer translated to TF and compared with the primary's TF text (what a
// copy without the primary's v2 answer does), and outputs, the two v2
// answers compared on their outputs (compareOutputs).
func BenchmarkCompareDrift(b *testing.B) {
	h := newHarness(b, Options{}, 1)
	w, _, _, sent := probeSent(b, h, false)
	dtap := &inferTap{first: true}
	c := h.copyOf(v2Target(b, 1e-6, dtap.wrap), predictPath, predictBody, ok(primaryOK))
	h.e.runWithin(w, c)
	h.e.Release(c.Reserved)
	body, hl := dtap.answer, dtap.answerHeaderLength
	tp, _ := translate.For(route.Predict)
	b.Run("texts", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tf, err := tp.Response(body, hl, sent.Exchange, h.e.o.Limits)
			if err != nil {
				b.Fatal(err)
			}
			if r := w.comparer(c).Compare(c.Primary, tfcompare.Answer{Status: http.StatusOK, Body: tf}); r.Verdict != tfcompare.Within {
				b.Fatalf("verdict %v", r.Verdict)
			}
		}
	})
	b.Run("outputs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r, ok := h.e.compareOutputs(w, c, sent, body, hl); !ok || r.Verdict != tfcompare.Within {
				b.Fatalf("compared on the outputs: %v", ok)
			}
		}
	})
}
