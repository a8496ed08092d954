package route

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// FuzzParse checks that Parse never panics, that every failure is either
// the pass-through sentinel (exactly for targets outside /v1/) or a TF 400,
// and that every route round-trips: its v2 paths keep the model in one
// escaped segment, and the canonical TF target rebuilt from it parses back
// to the same route.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.method, tc.path)
	}
	f.Add("GET", "/v1/models/modelname%21%23%24%25%26%27%28%29%2A%2B%2C%2F%3A%3B%3D%3F%40%5B%5D/labels/latest%21%23%24%25%26%27%28%29%2A%2B%2C%2F%3A%3B%3D%3F%40%5B%5D/metadata")
	f.Fuzz(func(t *testing.T, method, path string) {
		r, err := Parse(method, path)
		ours := len(path) >= 4 && strings.EqualFold(path[:4], "/v1/") && !strings.Contains(path[4:], "\n")
		if errors.Is(err, ErrNotTFServing) {
			if ours {
				t.Fatalf("Parse(%q, %q): ErrNotTFServing for a /v1/ target", method, path)
			}
			return
		}
		if !ours {
			t.Fatalf("Parse(%q, %q) = %v, %v; want ErrNotTFServing", method, path, r, err)
		}
		if err != nil {
			var ae *apierr.Error
			if !errors.As(err, &ae) || ae.Code != apierr.InvalidArgument || ae.Msg == "" {
				t.Fatalf("Parse(%q, %q): error %v is not a TF INVALID_ARGUMENT", method, path, err)
			}
			return
		}

		if r.Model == "" {
			t.Fatalf("Parse(%q, %q): empty model in %+v", method, path, r)
		}
		if r.HasVersion && (r.Label != "" || r.Version < 0) {
			t.Fatalf("Parse(%q, %q): bad version/label in %+v", method, path, r)
		}
		switch {
		case method == "POST" && (r.Verb == Predict || r.Verb == Classify || r.Verb == Regress):
		case method == "GET" && (r.Verb == Status || r.Verb == Metadata):
		default:
			t.Fatalf("Parse(%q, %q): verb %v for method %s", method, path, r.Verb, method)
		}

		p := r.V2ModelPath()
		rest, ok := strings.CutPrefix(p, "/v2/models/")
		if !ok || strings.ContainsAny(p, "?# ") {
			t.Fatalf("V2ModelPath() = %q for %+v", p, r)
		}
		seg, tail, _ := strings.Cut(rest, "/")
		if m, err := url.PathUnescape(seg); err != nil || m != r.Model {
			t.Fatalf("V2ModelPath() = %q: segment %q decodes to %q, %v; want %q", p, seg, m, err, r.Model)
		}
		if r.HasVersion != (tail != "") {
			t.Fatalf("V2ModelPath() = %q for %+v", p, r)
		}
		if r.V2InferPath() != p+"/infer" {
			t.Fatalf("V2InferPath() = %q; want %q", r.V2InferPath(), p+"/infer")
		}

		canon := tfPath(r)
		back, err := Parse(method, canon)
		if err != nil || back != r {
			t.Fatalf("Parse(%q, %q) = %+v; canonical %q parses to %+v, %v", method, path, r, canon, back, err)
		}
	})
}
