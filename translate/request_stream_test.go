package translate

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/internal/oracle"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
)

// streamOpt is RequestStream with the text dropped at once: the one-pass
// decoder answers alone, as for a body above ReplayBytes.
var streamOpt = RequestOptions{Kind: oip.Triton, ID: "s1", ReplayBytes: 1, Limits: tensor.Limits{MaxDepth: 16, MaxElements: 1 << 8}}

// streamAt writes body to a RequestStream cut at the sorted offsets cuts
// and closes it; a Write error ends it early (Close must agree).
func streamAt(t *testing.T, body []byte, resolve func(string) (*tensor.Signature, error), opt RequestOptions, cuts []int) (V2Request, Exchange, error) {
	t.Helper()
	s := predict.NewRequestStream(resolve, opt)
	prev := 0
	for _, c := range append(cuts, len(body)) {
		chunk := bytes.Clone(body[prev:c])
		prev = c
		werr := s.Write(chunk)
		clear(chunk)
		if werr != nil {
			req, ex, err := s.Close()
			if err == nil || err.Error() != werr.Error() {
				t.Fatalf("Write said %v, Close says %v", werr, err)
			}
			return req, ex, err
		}
	}
	return s.Close()
}

// sameTranslation asserts that the streamed answer is predict.Request's
// over the whole body — the v2 body and exchange, or the status and text —
// unless the body is one oracle.Undecidable lists and the answer is its
// 400. It reports whether the answer was undecided.
func sameTranslation(t *testing.T, body []byte, sig *tensor.Signature, opt RequestOptions, cuts []int) bool {
	t.Helper()
	resolve := func(string) (*tensor.Signature, error) { return sig, nil }
	want, wantEx, wantErr := predict.Request(body, resolve, opt)
	got, gotEx, err := streamAt(t, body, resolve, opt, cuts)
	if errors.Is(err, tfrequest.ErrUndecided) {
		if !oracle.Undecidable(body, sig, opt.Limits) {
			t.Fatalf("cut at %v, %q: undecided (%v) but not a documented case", cuts, body, err)
		}
		if s := apierr.As(err).HTTPStatus(); s != 400 {
			t.Fatalf("undecided with status %d", s)
		}
		return true
	}
	switch {
	case wantErr != nil:
		w, g := apierr.As(wantErr), apierr.As(err)
		if err == nil || w.HTTPStatus() != g.HTTPStatus() || w.Msg != g.Msg {
			t.Fatalf("cut at %v, %q:\n got %v\nwant %v", cuts, body, err, wantErr)
		}
	case err != nil:
		t.Fatalf("cut at %v, %q: %v; whole body translates", cuts, body, err)
	case !bytes.Equal(bytes.Join(got.Chunks(), nil), want.Body) || got.Len() != len(want.Body) ||
		got.HeaderLength != want.HeaderLength || got.ContentType != want.ContentType || gotEx != wantEx:
		t.Fatalf("cut at %v, %q: v2 body differs\n got %q\nwant %q", cuts, body, bytes.Join(got.Chunks(), nil), want.Body)
	}
	got.Release()
	return false
}

// chunkCuts returns the offsets that cut a body of n bytes into chunks of
// size (0: whole).
func chunkCuts(n, size int) []int {
	var cuts []int
	for p := size; size > 0 && p < n; p += size {
		cuts = append(cuts, p)
	}
	return cuts
}

// streamSigs are the signatures the streaming tests translate against.
var streamSigs = []*tensor.Signature{
	{Model: "m", Inputs: []tensor.Spec{{Name: "x", DataType: tensor.FP32}}},
	{Model: "m", Batched: true, Inputs: []tensor.Spec{{Name: "a", DataType: tensor.Int32}, {Name: "s", DataType: tensor.Bytes}}},
	{Model: "m", Inputs: []tensor.Spec{{Name: "s", DataType: tensor.Bytes}}},
	{Model: "m", Inputs: []tensor.Spec{{Name: "x", DataType: tensor.FP64, Shape: []int64{2}}}},
}

// streamBodies are valid and invalid bodies of every kind the stream
// must answer as the whole-body path does.
var streamBodies = []string{
	// Valid, rarities included.
	`{"instances": [[1.5, 2], [3, 4e-3]]}`,
	`{"instances": [{"a": [1, 2], "s": "x"}, {"s": {"b64": "aGk="}, "a": [3, 4]}]}`,
	`{"instances": [{"a": 1, "a": 2, "s": "p"}, {"s": "q", "a\u0000z": 3}]}`,
	`{"inputs": {"s": ["\u00e9\ud83d\ude00", "a\"b\\c\n"], "a": [[1, 2]]}}`,
	`{"instan\u0063es": ["\u0000", "x"], "signature_name": ""}`,
	`{"instances": [{"b64": "aGk="}, {"b64": " eW 8= "}]}`,
	`{"inputs": {"b64": "aGk="}}`,
	`{"inputs": {"b64": 1, "a": [2], "s": "x"}}`,
	`{"instances": [[0.1, 0.2]]}`,
	"\xEF\xBB\xBF {\"inputs\": [NaN, -Infinity, 1e308]} trailing [",
	// Syntax, anywhere.
	``, `  `, `[1, 2`, `{"instances": [1,]}`, `{"instances": [1 2]}`, "{\"instances\": [1\x00]}",
	`{"instances": [1x]}`, `{"instances": [tru]}`, `{"instances": [1e400]}`, `{"instances": [-]}`,
	`{"instances": ["a\qb"]}`, `{"instances": ["\u12x4"]}`, `{"instances": ["\ud800\u0041"]}`, "{\"instances\": [\"a\tb\"]}",
	`{"instances": [[1, "x"]], "z": [1,, 2]}`, `{"instances": [[1]] "inputs": 1}`, `{"a" 1}`, `{"instances": [1]`,
	`{"instances": [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}`,
	// Root and keys.
	`[1, {"a": [true, null]}, "x"]`, `"just a string"`, `{"signature_name": 1, "instances": [1]}`,
	`{"instances": [1], "signature_name": ["` + strings.Repeat("x", 300) + `"]}`,
	`{"instances": [1], "inputs": [1]}`, `{"instances": {"a": 1}}`, `{"instances": []}`, `{"x": [1]}`,
	// Values.
	`{"instances": [[1, 2], [3]]}`, `{"instances": [[1, "x"], [2]]}`, `{"instances": [[1, 2], [3, "x", 4]]}`,
	`{"inputs": [[1], [2, [3]]]}`, `{"inputs": [[1, 2], 3]}`, `{"inputs": [[], [1]]}`, `{"instances": [[1, 2], [[3, 4]]]}`,
	`{"instances": [null]}`, `{"instances": [{"b64": "aGk="}]}`, `{"instances": [{"b64": "!!"}]}`,
	`{"instances": [{"a": 1}, [2]]}`, `{"instances": [[1], {"a": 2}]}`, `{"instances": [{"q": 1}]}`,
	`{"instances": [{"a": 1}]}`, `{"instances": [{}]}`, `{"inputs": {"a": [1]}}`, `{"inputs": {"s": ["x", 1], "a": [1, "z"]}}`,
	`{"inputs": {"s": 1, "a": [[1, "x"]]}}`, `{"inputs": [{"k": [1, 2, NaN, 3]}]}`, `{"inputs": [{"k": "` + strings.Repeat("y", 300) + `"}]}`,
	`{"instances": [{"a": 1, "s": {"b64": "aGk=", "x": [1, 2]}}]}`, `{"instances": [` + strings.Repeat("1, ", 300) + `1]}`,
}

// TestRequestStreamAnswersAsWhole: every body of the table, against every
// signature, in chunks of 1, 2, 3, 7, 64 bytes and whole, with no text
// kept, gets exactly predict.Request's answer.
func TestRequestStreamAnswersAsWhole(t *testing.T) {
	bodies := streamBodies
	for _, b := range conformance.RequestBodies(t, "tfserving_cases.json") {
		bodies = append(bodies, string(b))
	}
	for _, sig := range streamSigs {
		for _, body := range bodies {
			for _, size := range []int{1, 2, 3, 7, 64, 0} {
				if sameTranslation(t, []byte(body), sig, streamOpt, chunkCuts(len(body), size)) {
					t.Errorf("%q: undecided", body)
				}
			}
		}
	}
}

// FuzzRequestStream cuts random bodies at random points: with no text
// kept, RequestStream answers exactly as predict.Request over the whole
// body (v2 body bytes, or status and text), but for the bodies
// oracle.Undecidable lists, which get a 400.
func FuzzRequestStream(f *testing.F) {
	for i, b := range streamBodies {
		f.Add([]byte(b), uint8(i), uint64(i))
	}
	for i, b := range conformance.RequestBodies(f, "tfserving_cases.json") {
		f.Add(b, uint8(i), uint64(i))
	}
	f.Fuzz(func(t *testing.T, body []byte, sel uint8, seed uint64) {
		r := rand.New(rand.NewPCG(seed, seed>>32))
		var cuts []int
		for p := 0; p < len(body); {
			p += r.IntN(1 + []int{1, 4, 64, 4096}[r.IntN(4)])
			cuts = append(cuts, min(p, len(body)))
		}
		sameTranslation(t, body, streamSigs[int(sel)%len(streamSigs)], streamOpt, cuts)
	})
}
