package shadow

import (
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// TestTFSignatureMemo: a model's TF signature is made again whenever the
// map's signature, the server's or the TF model name changes, and reused
// while none does.
func TestTFSignatureMemo(t *testing.T) {
	ms1 := &modelmap.Signature{Model: "m1"}
	ms2 := &modelmap.Signature{Model: "m2"}
	w1 := &tensor.Signature{Model: "m1", Inputs: []tensor.Spec{{Name: "x"}}}
	w2 := &tensor.Signature{Model: "m1", Inputs: []tensor.Spec{{Name: "y"}}}
	var st modelState
	first := st.tfSignature(ms1, w1, "tf")
	if first.Model != "tf" || first.Inputs[0].Name != "x" {
		t.Fatalf("first = %+v", first)
	}
	if got := st.tfSignature(ms1, w1, "tf"); got != first {
		t.Fatal("the same inputs made a new signature")
	}
	for _, tc := range []struct {
		name  string
		ms    *modelmap.Signature
		wire  *tensor.Signature
		model string
		input string
	}{
		{"server's signature changed", ms1, w2, "tf", "y"},
		{"map's signature changed", ms2, w2, "tf", "y"},
		{"TF model changed", ms2, w2, "other", "y"},
	} {
		got := st.tfSignature(tc.ms, tc.wire, tc.model)
		if got == first || got.Model != tc.model || got.Inputs[0].Name != tc.input {
			t.Errorf("%s: got %+v", tc.name, got)
		}
		first = got
	}
}

// TestAnswerBuf: a worker reuses its answer buffer up to maxScratchBody;
// a larger answer gets a buffer of its own, the worker's left as it was.
func TestAnswerBuf(t *testing.T) {
	w := (&Engine{}).newScratch()
	a := w.answerBuf(100)
	b := w.answerBuf(200)
	if len(a) != 100 || len(b) != 200 || &a[0] != &b[0] {
		t.Fatalf("small answers: len %d, %d, same buffer %v", len(a), len(b), &a[0] == &b[0])
	}
	big := w.answerBuf(maxScratchBody + 1)
	if len(big) != maxScratchBody+1 || &big[0] == &b[0] || cap(w.body) > maxScratchBody {
		t.Fatalf("big answer: len %d, worker's buffer cap %d", len(big), cap(w.body))
	}
	if c := w.answerBuf(maxScratchBody); len(c) != maxScratchBody || cap(w.body) != maxScratchBody {
		t.Fatalf("largest kept: len %d, cap %d", len(c), cap(w.body))
	}
}
