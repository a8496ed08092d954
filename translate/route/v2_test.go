package route

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func TestParseV2(t *testing.T) {
	tests := []struct {
		method, target string
		want           Endpoint
	}{
		{"GET", "/v2", EndpointServerMetadata},
		{"HEAD", "/v2", EndpointServerMetadata},
		{"GET", "/v2?x=1", EndpointServerMetadata},
		{"GET", "/v2/health/live", EndpointHealth},
		{"GET", "/v2/health/ready", EndpointHealth},
		{"GET", "/v2/models/m", EndpointModelMetadata},
		{"GET", "/v2/models/m/versions/3", EndpointModelMetadata},
		{"GET", "/v2/models/versions", EndpointModelMetadata},
		{"GET", "/v2/models/m/ready", EndpointModelReady},
		{"GET", "/v2/models/m/versions/3/ready", EndpointModelReady},
		{"POST", "/v2/models/m/infer", EndpointInfer},
		{"POST", "/v2/models/a%2Fb/versions/1/infer", EndpointInfer},
		{"POST", "/v2/models/m/infer?debug=1", EndpointInfer},
		{"GET", "/v2/models/m/config", EndpointModelConfig},
		{"GET", "/v2/models/m/versions/1/config", EndpointModelConfig},

		// Wrong methods.
		{"POST", "/v2", EndpointOther},
		{"GET", "/v2/models/m/infer", EndpointOther},
		{"DELETE", "/v2/models/m", EndpointOther},
		{"POST", "/v2/health/ready", EndpointOther},
		{"OPTIONS", "/v2/models/m/infer", EndpointOther},
		{"CONNECT", "example.com:443", EndpointOther},
		// Triton's control plane and other extensions.
		{"POST", "/v2/repository/models/m/unload", EndpointOther},
		{"POST", "/v2/repository/index", EndpointOther},
		{"POST", "/v2/systemsharedmemory/region/r/register", EndpointOther},
		{"GET", "/v2/cudasharedmemory/status", EndpointOther},
		{"POST", "/v2/trace/setting", EndpointOther},
		{"POST", "/v2/models/m/trace/setting", EndpointOther},
		{"POST", "/v2/logging", EndpointOther},
		{"GET", "/v2/models/m/stats", EndpointOther},
		{"GET", "/v2/models/stats", EndpointModelMetadata}, // a model named "stats"
		{"POST", "/v2/models/m/generate", EndpointOther},
		// Outside /v2.
		{"GET", "/", EndpointOther},
		{"GET", "/metrics", EndpointOther},
		{"GET", "//host/x", EndpointOther},
		{"GET", "/V2/health/ready", EndpointOther},
		{"GET", "/v2/", EndpointOther},
		{"GET", "/v2/health", EndpointOther},
		{"GET", "http://elsewhere/v2", EndpointOther},
		// Paths a normalising hop reads differently.
		{"GET", "/v2/models/../repository/index", EndpointOther},
		{"POST", "/v2/models/../infer", EndpointOther},
		{"POST", "/v2/models/%2E%2E/infer", EndpointOther},
		{"POST", "/v2/models/%2e/infer", EndpointOther},
		{"POST", "/v2/models/m/versions/../infer", EndpointOther},
		{"POST", "/v2/models/m/versions/%2E%2E/infer", EndpointOther},
		{"POST", "/v2/models/..%2F..%2Frepository/infer", EndpointOther},
		{"POST", "/v2/models/a%5C../infer", EndpointOther},
		{"POST", "/v2/models//infer", EndpointOther},
		{"GET", "/v2/models/", EndpointOther},
		{"GET", "/v2/models/m/", EndpointOther},
		{"GET", "/v2/models/m/versions/", EndpointOther},
		{"GET", "/v2/models/m/versions", EndpointOther},
		{"POST", "/v2/models/m/infer/", EndpointOther},
		{"POST", "/v2/models/m/ready/infer", EndpointOther},
	}
	for _, tc := range tests {
		if got := ParseV2(tc.method, tc.target); got != tc.want {
			t.Errorf("ParseV2(%q, %q) = %d; want %d", tc.method, tc.target, got, tc.want)
		}
	}
}

func TestEndpointInference(t *testing.T) {
	want := map[Endpoint]bool{
		EndpointOther: false, EndpointHealth: true, EndpointServerMetadata: true, EndpointModelMetadata: true,
		EndpointModelReady: true, EndpointInfer: true, EndpointModelConfig: false,
	}
	for e, w := range want {
		if e.Inference() != w {
			t.Errorf("Endpoint(%d).Inference() = %v; want %v", e, !w, w)
		}
	}
}

func TestSafeSegment(t *testing.T) {
	for name, want := range map[string]bool{
		"m": true, "half_plus_two": true, "a/b": true, "...": true, ".a": true, "a.": true, "..a": true,
		"%2E%2E": true, // the client sent %252E%252E: a literal name, escaped again
		"":       false, ".": false, "..": false, "../x": false, "x/..": false, "a/./b": false,
		`..\`: false, `a\..\b`: false, "/..": false, "./": false,
	} {
		if got := SafeSegment(name); got != want {
			t.Errorf("SafeSegment(%q) = %v; want %v", name, got, want)
		}
	}
	if (Route{Model: ".."}).V2Safe() || !(Route{Model: "m"}).V2Safe() {
		t.Error("V2Safe does not follow SafeSegment")
	}
}

func TestV2ModelPathNeverADotSegment(t *testing.T) {
	for name, want := range map[string]string{
		".":   "/v2/models/%2E/infer",
		"..":  "/v2/models/%2E%2E/infer",
		"...": "/v2/models/.../infer",
	} {
		if got := (Route{Verb: Predict, Model: name}).V2InferPath(); got != want {
			t.Errorf("V2InferPath() for %q = %q; want %q", name, got, want)
		}
	}
}

// normalisingHop is the most aggressive path normaliser between tfsbridge
// and a v2 server: it decodes every unreserved character (RFC 3986
// §6.2.2.2) and the escaped separators %2F and %5C (Envoy's
// path_with_escaped_slashes_action UNESCAPE_AND_FORWARD), reads "\" as
// "/" (WHATWG URL parsing) and reports whether dot-segment removal
// (§6.2.2.3) would then change the path.
func normalisingHop(path string) (segments []string, changes bool) {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c == '%' && i+2 < len(path) && isHex(path[i+1]) && isHex(path[i+2]) {
			d := unhex(path[i+1])<<4 | unhex(path[i+2])
			if d == '/' || d == '\\' || d == '-' || d == '.' || d == '_' || d == '~' ||
				'a' <= d && d <= 'z' || 'A' <= d && d <= 'Z' || '0' <= d && d <= '9' {
				c = d
				i += 2
			}
		}
		if c == '\\' {
			c = '/'
		}
		b.WriteByte(c)
	}
	segments = strings.Split(b.String(), "/")
	for _, s := range segments {
		if s == "." || s == ".." {
			return segments, true
		}
	}
	return segments, false
}

// FuzzV2Path checks the route → v2 path builder whatever the TF URL: the
// infer path is exactly /v2/models/<one segment>[/versions/<digits>]/infer,
// the segment unescapes to the model name and is never a dot segment, and
// a route the session may send (V2Safe) keeps that shape behind the most
// aggressive normalising hop.
func FuzzV2Path(f *testing.F) {
	for _, tc := range parseCases {
		if tc.method == "POST" {
			f.Add(tc.path)
		}
	}
	for _, p := range []string{
		"/v1/models/..:predict", "/v1/models/%2E%2E:predict", "/v1/models/%2e/versions/3:predict",
		"/v1/models/..%2F..%2Frepository:predict", "/v1/models/a%5C..:predict", "/v1/models/%252E%252E:predict",
		"/v1/models/.../versions/1:predict",
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, target string) {
		r, err := Parse("POST", target)
		if err != nil {
			return
		}
		p := r.V2InferPath()
		segs := strings.Split(p, "/")
		want := 5 // "", v2, models, M, infer
		if r.HasVersion {
			want = 7
		}
		if len(segs) != want || segs[0] != "" || segs[1] != "v2" || segs[2] != "models" || segs[want-1] != "infer" {
			t.Fatalf("%q: V2InferPath() = %q, not /v2/models/<m>[/versions/<v>]/infer", target, p)
		}
		if r.HasVersion && (segs[4] != "versions" || segs[5] != strconv.FormatInt(r.Version, 10)) {
			t.Fatalf("%q: V2InferPath() = %q for version %d", target, p, r.Version)
		}
		if strings.ContainsAny(p, "?# ") {
			t.Fatalf("%q: V2InferPath() = %q holds a query, fragment or space", target, p)
		}
		seg := segs[3]
		if seg == "." || seg == ".." {
			t.Fatalf("%q: V2InferPath() = %q has a dot segment", target, p)
		}
		if m, err := url.PathUnescape(seg); err != nil || m != r.Model {
			t.Fatalf("%q: segment %q unescapes to %q, %v; want %q", target, seg, m, err, r.Model)
		}
		if !r.V2Safe() {
			return
		}
		if _, changes := normalisingHop(p); changes {
			t.Fatalf("%q: V2Safe route's path %q has a dot segment behind a normalising hop", target, p)
		}
		if ParseV2("POST", p) != EndpointInfer {
			t.Fatalf("%q: V2InferPath() = %q is not an infer endpoint for ParseV2", target, p)
		}
	})
}

// FuzzParseV2 checks that whatever ParseV2 accepts stays the same path
// behind a normalising hop: no empty or dot segments, however encoded.
func FuzzParseV2(f *testing.F) {
	f.Add("GET", "/v2/models/m/versions/1/ready")
	f.Add("POST", "/v2/models/%2E%2E/infer")
	f.Add("GET", "/v2/models/a%5C..%5Cb")
	f.Add("GET", "/v2/health/live?x")
	f.Fuzz(func(t *testing.T, method, target string) {
		e := ParseV2(method, target)
		if e == EndpointOther {
			return
		}
		path, _, _ := strings.Cut(target, "?")
		if !strings.HasPrefix(path, "/v2") {
			t.Fatalf("ParseV2(%q, %q) = %d outside /v2", method, target, e)
		}
		segs, changes := normalisingHop(path)
		if changes {
			t.Fatalf("ParseV2(%q, %q) = %d; a normalising hop removes a dot segment", method, target, e)
		}
		if (e == EndpointInfer) != (method == "POST") {
			t.Fatalf("ParseV2(%q, %q) = %d for method %s", method, target, e, method)
		}
		if strings.Contains(path, "//") {
			t.Fatalf("ParseV2(%q, %q) = %d with an empty segment (%q)", method, target, e, segs)
		}
	})
}
