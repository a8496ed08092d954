package tfexample

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/tfsbridge/tfsbridge/test/conformance"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// FuzzParse: no input panics or hangs; every failure is an *apierr.Error
// with a 4xx status (apierr.As makes anything else a 500); every success
// is one example per element of "examples", each of which protobuf parses
// as a tf.Example (feature names as raw bytes, as TF Serving keeps them),
// within the limits.
func FuzzParse(f *testing.F) {
	for _, body := range conformance.RequestBodies(f, "tfserving_cases.json") {
		f.Add(body)
	}
	for _, s := range []string{
		`{"examples": [{"s": "a", "b": {"b64": "aGk="}, "i": [7, -1, true], "x": [1.5, NaN], "e": []}]}`,
		`{"signature_name": "s", "context": {"c": 1, "d": "x"}, "examples": [{"c": 2.0}, {}, {"c\u0000": "y", "c": 3}]}`,
		`{"examples": [{"x": [18446744073709551616, 9223372036854775808]}]}`,
		`{"examples": [{"n": null}], "context": []}`,
	} {
		f.Add([]byte(s))
	}
	const maxBytes = 1 << 16
	opt := Options{Limits: tensor.Limits{MaxDepth: 16, MaxElements: 1 << 10}, MaxBytes: maxBytes}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Parse(body, opt)
		if err != nil {
			if s := apierr.As(err).HTTPStatus(); s < 400 || s >= 500 {
				t.Fatalf("status %d for %v (%T)", s, err, err)
			}
			return
		}
		if len(r.Examples) == 0 || int64(len(r.Examples)) > opt.Limits.MaxElements {
			t.Fatalf("%d examples", len(r.Examples))
		}
		total := 0
		for i, ex := range r.Examples {
			total += len(ex)
			if err := proto.Unmarshal(ex, dynamicpb.NewMessage(rawKeyExampleDescriptor)); err != nil {
				t.Fatalf("example %d %x does not parse: %v", i, ex, err)
			}
		}
		if total > maxBytes {
			t.Fatalf("%d bytes of examples over the limit %d", total, maxBytes)
		}
	})
}
