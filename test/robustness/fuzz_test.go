package robustness

import (
	"errors"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// maxSeed keeps fuzz seeds small: the fuzzer mutates them byte by byte.
const maxSeed = 4096

// fuzzLimits are small so the fuzzer reaches the limit checks.
var fuzzLimits = tensor.Limits{MaxDepth: 24, MaxElements: 1 << 14}

// FuzzTranslateRequest: whatever the body, signature and server kind,
// the predict pipeline's Request answers a 4xx *apierr.Error or a v2 body whose size is
// bounded by the TF body's (a value costs 2 body bytes and at most 8
// binary bytes or 16 JSON bytes, plus a header per input).
func FuzzTranslateRequest(f *testing.F) {
	for _, c := range requestCases() {
		if len(c.body) <= maxSeed {
			f.Add([]byte(c.body), uint8(0))
		}
	}
	f.Add([]byte(`{"instances":[{"a":[1.5],"b":{"b64":"aGk="}},{"b":"x","a":[2]}]}`), uint8(2))
	f.Add([]byte(`{"inputs":{"a":[[1],[2]],"b":[["\u00e9"],["\ud83d\ude00"]]}}`), uint8(5))
	sigs := []*tensor.Signature{sigFloat, sigInt, sigMulti, sigBytes}
	kinds := []oip.ServerKind{oip.Triton, oip.KServe, oip.MLServer}
	f.Fuzz(func(t *testing.T, body []byte, sel uint8) {
		sig := sigs[int(sel)%len(sigs)]
		kind := kinds[int(sel/4)%len(kinds)]
		req, _, err := predictPipeline.Request(body, resolverFor(sig), translate.RequestOptions{Kind: kind, Limits: fuzzLimits})
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
		if limit := 16*len(body) + 4096; len(req.Body) > limit {
			t.Fatalf("a %d-byte TF body became a %d-byte v2 body", len(body), len(req.Body))
		}
		if req.HeaderLength > len(req.Body) {
			t.Fatalf("header length %d beyond the %d-byte body", req.HeaderLength, len(req.Body))
		}
	})
}

// FuzzTranslateResponse: whatever the v2 answer, the predict pipeline's Response gives a
// 400, 500 or 502 *apierr.Error or a TF body within the writer's budget
// (128× the tensors' bytes plus 1 MiB; tensors decoded from JSON take at
// most 4× the body).
func FuzzTranslateResponse(f *testing.F) {
	for _, c := range responseCases() {
		if len(c.body) <= maxSeed {
			f.Add(c.body, int32(c.hl), c.format == tfjson.Columnar)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, hl int32, columnar bool) {
		format := tfjson.Row
		if columnar {
			format = tfjson.Columnar
		}
		ex := translate.Exchange{Format: format, Signature: sigFloat}
		out, err := predictPipeline.Response(body, int(hl), ex, fuzzLimits)
		if err != nil {
			var e *apierr.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is %T, not *apierr.Error", err, err)
			}
			if s := e.HTTPStatus(); s != 400 && s != 500 && s != 502 {
				t.Fatalf("status %d for %q", s, e.Msg)
			}
			return
		}
		if limit := 512*len(body) + 1<<20 + 4096; len(out) > limit {
			t.Fatalf("a %d-byte v2 body became a %d-byte TF body", len(body), len(out))
		}
	})
}
