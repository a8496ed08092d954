package session

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/internal/fakev2"
)

// TestRequestParts: a whole body handed over in pieces (ext_proc
// BUFFERED's frames) gets the action and the v2 bytes RequestChunk gives
// the same body in one piece with Whole, however it is cut: valid bodies,
// errors at any point, a body the streaming decoder cannot settle alone
// (an "inputs" object starting with "b64" when an input has that name,
// longer than the decoder's replay) and a gzip-encoded one.
func TestRequestParts(t *testing.T) {
	twoInputs := fakev2.Model{Name: "two", Versions: []string{"1"},
		Inputs:  []fakev2.Tensor{{Name: "b64", Datatype: "FP32", Shape: []int64{-1}}, {Name: "x", Datatype: "FP32", Shape: []int64{-1}}},
		Outputs: []fakev2.Tensor{{Name: "y", Datatype: "FP32", Shape: []int64{-1}}}}
	e := newEnv(t, "triton", halfPlusTwo, twoInputs)
	e.cfg.MaxBodyBytes = 4 << 20
	long := strings.TrimSuffix(strings.Repeat("1.5, ", 40000), ", ")
	bodies := []struct{ model, body string }{
		{"half_plus_two", `{"instances": [1.0, 2.0, 5.0]}`},
		{"half_plus_two", `{"instances": [` + long + `]}`},
		{"half_plus_two", `{"instances": [` + long + `, "x"]}`},
		{"half_plus_two", `{"instances": [` + long + `,]}`},
		{"half_plus_two", `{"instances": [` + long},
		{"half_plus_two", `{"inputs": {"x": [` + long + `]}, "signature_name": "nope"}`},
		{"two", `{"inputs": {"b64": [` + long + `], "x": [` + long + `]}}`},
		{"two", `{"inputs": {"b64": [` + long + `], "x": [1.0]}}`},
	}
	ctx := context.Background()
	for i, c := range bodies {
		path := "/v1/models/" + c.model + ":predict"
		whole := New(e.cfg)
		whole.RequestHeaders(ctx, "POST", path, hdr{"x-request-id": "r1"}, false)
		want := whole.RequestChunk(ctx, []byte(c.body), true, Whole)
		whole.Close()
		for _, size := range []int{1 << 30, 16 << 10, 1000, 7} {
			var chunks [][]byte
			for b := []byte(c.body); len(b) > 0; b = b[min(size, len(b)):] {
				chunks = append(chunks, b[:min(size, len(b))])
			}
			s := New(e.cfg)
			s.RequestHeaders(ctx, "POST", path, hdr{"x-request-id": "r1"}, false)
			got, parts, release := s.RequestParts(ctx, chunks)
			if (parts != nil) != (release != nil) {
				// Parts are the decoder's pooled blocks, given back by release.
				t.Errorf("body %d in pieces of %d: %d parts with release %v", i, size, len(parts), release != nil)
			}
			if parts != nil {
				if got.Body != nil {
					t.Errorf("body %d: a body in the action and in parts", i)
				}
				got.Body = bytes.Join(parts, nil)
			}
			s.Close()
			if release != nil {
				release()
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("body %d in pieces of %d:\n got %v %d %v %.200q\nwant %v %d %v %.200q", i, size,
					got.Verdict, got.Status, got.Set, got.Body, want.Verdict, want.Status, want.Set, want.Body)
			}
		}
		if i == len(bodies)-2 && want.Verdict != Continue {
			t.Errorf("the undecided body: %v %.300s, want it translated", want.Verdict, want.Body)
		}
	}
}
