package shadow

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sync"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
)

// worstHistogram is the model's worst-relative-error histogram: its
// sample count and sum.
func (h *harness) worstHistogram() (uint64, float64) {
	h.t.Helper()
	mfs, err := h.m.Registry.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "tfsbridge_shadow_worst_relative_error" {
			for _, m := range mf.GetMetric() {
				hist := m.GetHistogram()
				return hist.GetSampleCount(), hist.GetSampleSum()
			}
		}
	}
	return 0, 0
}

// TestEngineComparesOutputs: a copy that sent the primary's request and
// has its v2 answer is compared on the two answers' outputs, and counts
// what the comparison of the TF texts counts (a copy without Sent, whose
// answer is translated): the result, the worst relative error observed,
// and a mismatch's log line, which comes from the texts.
func TestEngineComparesOutputs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		delta  float64
		result string
	}{
		{"drift within tolerance", 1e-6, observe.ShadowMatch},
		{"drift below the primary", -3e-6, observe.ShadowMatch},
		{"perturbed", 1e-3, observe.ShadowMismatch},
		{"faithful", 0, observe.ShadowMatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lines [2][]byte
			var hist [2]struct {
				n   uint64
				sum float64
			}
			for i, withSent := range []bool{false, true} {
				h := newHarness(t, Options{}, 1)
				w, c, _, sent := probeSent(t, h, false)
				target := v2Target(t, tc.delta, nil)
				for range 2 { // the second finds the answers' layout made
					c = h.copyOf(target, predictPath, predictBody, ok(primaryOK))
					if withSent {
						c.Sent = sent
					}
					h.e.runWithin(w, c)
					h.e.Release(c.Reserved)
				}
				if got := h.count(tc.result); got != 3-boolInt(tc.result != observe.ShadowMatch) {
					t.Errorf("Sent %v: %d %s, want the copies' and the probe's", withSent, got, tc.result)
				}
				if made := c.model.layout.Load() != nil; made != withSent && tc.delta != 0 {
					t.Errorf("Sent %v: answers compared on their outputs: %v", withSent, made)
				}
				if hist[i].n, hist[i].sum = h.worstHistogram(); hist[i].n != 3 {
					t.Errorf("Sent %v: %d worst relative errors observed, want 3", withSent, hist[i].n)
				}
				lines[i], _ = os.ReadFile(h.logFile)
			}
			if hist[0] != hist[1] {
				t.Errorf("worst relative error histogram: texts %+v, outputs %+v", hist[0], hist[1])
			}
			stamp := regexp.MustCompile(`"time":"[^"]*"`)
			a, b := stamp.ReplaceAll(lines[0], nil), stamp.ReplaceAll(lines[1], nil)
			if !bytes.Equal(a, b) || (tc.result == observe.ShadowMismatch) != (len(a) > 0) {
				t.Errorf("mismatch log: texts\n%s\noutputs\n%s", a, b)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestModelOutputs: the outputs of a v2 answer are
// translate.PredictOutputs' whether its header is decoded or its layout
// reused, and a header that changes gets a layout of its own.
func TestModelOutputs(t *testing.T) {
	h := newHarness(t, Options{}, 1)
	w, c, _, sent := probeSent(t, h, true)
	answer, hl, ex, lim := sent.Answer, sent.AnswerHeaderLength, sent.Exchange, h.e.o.Limits
	if hl <= 0 {
		t.Fatalf("the mock's answer is not binary: %q", answer)
	}
	otherID := bytes.Replace(answer, []byte(`"id":"rid"`), []byte(`"id":"another"`), 1)
	reshaped := bytes.Replace(answer, []byte(`"shape":[3]`), []byte(`"shape":[1,3]`), 1)
	unbatched := ex
	unbatched.Unbatched = true
	jsonAnswer := []byte(`{"id":"rid","model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[2.5,3.0,4.5]}]}`)
	st := h.e.model("half_plus_two")
	var last *layout
	for _, tc := range []struct {
		name   string
		body   []byte
		hl     int
		ex     translate.Exchange
		layout string // "new", "same" or "" (none)
	}{
		{"a binary answer", answer, hl, ex, "new"},
		{"again", answer, hl, ex, "same"},
		{"another id", otherID, hl + len("another") - len("rid"), ex, "same"},
		{"unbatched", answer, hl, unbatched, "same"},
		{"a byte too many", append(bytes.Clone(answer), 0), hl, ex, "same"},
		{"a byte too few", answer[:len(answer)-1], hl, ex, "same"},
		{"another shape", reshaped, hl + 2, ex, "new"},
		{"a JSON answer", jsonAnswer, -1, ex, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := translate.PredictOutputs(tc.body, tc.hl, tc.ex, lim)
			got, ok := st.outputs(nil, tc.body, tc.hl, tc.ex, lim)
			if ok != (err == nil) {
				t.Fatalf("ok %v, PredictOutputs' error %v", ok, err)
			}
			if ok && !reflect.DeepEqual(got, want) {
				t.Errorf("outputs\n%+v\nwant\n%+v", got, want)
			}
			l := st.layout.Load()
			switch tc.layout {
			case "new":
				if l == nil || l == last {
					t.Errorf("no new layout")
				}
			case "same":
				if l != last {
					t.Errorf("the layout changed")
				}
			}
			last = l
		})
	}
	// The outputs compare as their texts do.
	a, _ := st.outputs(nil, answer, hl, ex, lim)
	r, ok := w.comparer(c).ComparePredict(tfcompare.Predict{Outputs: a, Format: ex.Format}, tfcompare.Predict{Outputs: a, Format: ex.Format})
	if !ok || r.Verdict != tfcompare.Identical || len(r.Outputs) != 1 || r.Outputs[0].Name != "predictions" || r.Outputs[0].Elements != 3 {
		t.Errorf("ComparePredict of the answer with itself: %v %+v", ok, r)
	}
	// Workers share the model's layout: answers of two layouts (and of
	// two ids) decoded at once, each worker's outputs always its own
	// answer's, whichever layout another worker stored meanwhile (run
	// under -race: the layout is read-only once stored).
	bodies := []struct {
		body []byte
		hl   int
	}{{answer, hl}, {reshaped, hl + 2}, {otherID, hl + len("another") - len("rid")}}
	wants := make([][]tensor.Tensor, len(bodies))
	for i, b := range bodies {
		var err error
		if wants[i], err = translate.PredictOutputs(b.body, b.hl, ex, lim); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Go(func() {
			var dst []tensor.Tensor
			for i := range 300 {
				k := (g + i) % len(bodies)
				got, ok := st.outputs(dst[:0], bodies[k].body, bodies[k].hl, ex, lim)
				if !ok || !reflect.DeepEqual(got, wants[k]) {
					errs <- fmt.Sprintf("worker %d, answer %d: outputs %+v, want %+v", g, k, got, wants[k])
					return
				}
				dst = got
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
