package tfrequest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// FuzzParse: no input panics or hangs; every failure is an *apierr.Error
// with a 4xx status; every success is one valid tensor per signature input
// (TF's input-count check), whose size is bounded by the body that
// produced them and by the limits.
func FuzzParse(f *testing.F) {
	for _, c := range conformance.MustLoad(f, "tfserving_cases.json") {
		var in reqInput
		if c.Direction == "request" && json.Unmarshal(c.Input, &in) == nil && in.JSON != "" {
			for sel := uint8(0); sel < 4; sel++ {
				f.Add([]byte(in.JSON), sel)
			}
		}
	}
	for _, s := range []string{
		`{"instances": [{"a": [1, 2], "s": {"b64": "aGk="}}, {"s": "x", "a": [3, 4], "a": [5, 6]}]}`,
		`{"inputs": {"a": [[1], [2]], "s": ["\u00e9\ud83d\ude00"], "h": 1.5, "b": true}}`,
		`{"signature_name": "x", "inputs": [NaN, -Infinity, 1e308, 2e308]}`,
		`{"instances": [[[[1]]], [[[2]]]]}`,
		`{"instances": [{"b64": "aGk="}, "x"]}`,
		`{"instances": [{"a\u0000x": 1, "s\u0000": "y", "a\u0000": 2}]}`,
	} {
		for sel := uint8(0); sel < 4; sel++ {
			f.Add([]byte(s), sel)
		}
	}
	sigs := []*tensor.Signature{
		sigOf("a:FP32"),
		sigOf("a:INT32", "s:BYTES"),
		sigOf("a:INT8", "s:BYTES", "h:FP16", "b:BOOL", "u:UINT64", "d:FP64", "w:BF16", "v:UINT16"),
		sigOf("s:BYTES"),
	}
	lim := tensor.Limits{MaxDepth: 16, MaxElements: 1 << 12}
	f.Fuzz(func(t *testing.T, body []byte, sel uint8) {
		sig := sigs[int(sel)%len(sigs)]
		req, err := Parse(body, fixed(sig), lim)
		if err != nil {
			var e *apierr.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is %T, not *apierr.Error", err, err)
			}
			if s := e.HTTPStatus(); s < 400 || s >= 500 {
				t.Fatalf("status %d for %q", s, e.Msg)
			}
			return
		}
		defer req.Release()
		if len(req.Inputs) != len(sig.Inputs) {
			t.Fatalf("%d tensors for %d signature inputs", len(req.Inputs), len(sig.Inputs))
		}
		var elems, dataBytes, strBytes int
		for i := range req.Inputs {
			tt := &req.Inputs[i]
			if err := tt.Validate(); err != nil {
				t.Fatalf("invalid tensor: %v", err)
			}
			if _, ok := sig.Input(tt.Name); !ok {
				t.Fatalf("tensor %q not in the signature", tt.Name)
			}
			elems += tt.Len()
			dataBytes += len(tt.Data)
			for _, s := range tt.Strings {
				strBytes += len(s)
			}
		}
		// Each element needs at least one byte of body; no element is
		// wider than 8 bytes; strings only shrink when unescaped/decoded.
		if elems > len(body) || int64(elems) > lim.MaxElements || dataBytes > 8*len(body) || strBytes > len(body) {
			t.Fatalf("%d elements, %d data bytes, %d string bytes from a %d-byte body", elems, dataBytes, strBytes, len(body))
		}
	})
}
