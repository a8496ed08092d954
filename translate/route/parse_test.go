package route

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// parseCase is one request line and either the route or TF's exact error
// text (always INVALID_ARGUMENT, HTTP 400) it must produce.
type parseCase struct {
	name    string
	method  string
	path    string
	want    Route
	wantErr string // exact apierr message; "" = success
	notTF   bool   // expect ErrNotTFServing
}

var parseCases = []parseCase{
	// Dispatch: only (?i)/v1/.* is TF Serving's.
	{name: "v2 infer", method: "POST", path: "/v2/models/m/infer", notTF: true},
	{name: "root", method: "GET", path: "/", notTF: true},
	{name: "empty", method: "GET", path: "", notTF: true},
	{name: "v1 without slash", method: "GET", path: "/v1", notTF: true},
	{name: "v1x", method: "GET", path: "/v1x/models/m", notTF: true},
	{name: "relative", method: "GET", path: "v1/models/m", notTF: true},
	{name: "nested v1", method: "GET", path: "/x/v1/models/m", notTF: true},
	{name: "newline after v1", method: "GET", path: "/v1/models/m\n", notTF: true},
	{name: "put elsewhere", method: "PUT", path: "/metrics", notTF: true},
	{name: "bare v1 slash", method: "GET", path: "/v1/", wantErr: "Malformed request: GET /v1/"},
	{name: "upper V1", method: "GET", path: "/V1/", wantErr: "Malformed request: GET /V1/"},

	// POST inference.
	{name: "predict", method: "POST", path: "/v1/models/m:predict", want: Route{Verb: Predict, Model: "m"}},
	{name: "classify", method: "POST", path: "/v1/models/m:classify", want: Route{Verb: Classify, Model: "m"}},
	{name: "regress", method: "POST", path: "/v1/models/m:regress", want: Route{Verb: Regress, Model: "m"}},
	{name: "path case-insensitive", method: "POST", path: "/V1/MODELS/Half_Plus_Two:predict", want: Route{Verb: Predict, Model: "Half_Plus_Two"}},
	{name: "mixed case versions", method: "POST", path: "/v1/Models/m/VERSIONS/3:predict", want: Route{Verb: Predict, Model: "m", Version: 3, HasVersion: true}},
	{name: "version", method: "POST", path: "/v1/models/m/versions/50:predict", want: Route{Verb: Predict, Model: "m", Version: 50, HasVersion: true}},
	{name: "version zero", method: "POST", path: "/v1/models/m/versions/0:predict", want: Route{Verb: Predict, Model: "m", Version: 0, HasVersion: true}},
	{name: "version leading zeros", method: "POST", path: "/v1/models/m/versions/007:regress", want: Route{Verb: Regress, Model: "m", Version: 7, HasVersion: true}},
	{name: "version max int64", method: "POST", path: "/v1/models/m/versions/9223372036854775807:predict", want: Route{Verb: Predict, Model: "m", Version: 9223372036854775807, HasVersion: true}},
	{name: "version int64 overflow", method: "POST", path: "/v1/models/m/versions/9223372036854775808:predict", wantErr: "Failed to convert version: 9223372036854775808 to numeric."},
	{name: "version uint64 max", method: "POST", path: "/v1/models/foo/versions/18446744073709551615:regress", wantErr: "Failed to convert version: 18446744073709551615 to numeric."},
	{name: "version overflow before verb case", method: "POST", path: "/v1/models/m/versions/99999999999999999999:PREDICT", wantErr: "Failed to convert version: 99999999999999999999 to numeric."},
	{name: "label", method: "POST", path: "/v1/models/m/labels/stable:predict", want: Route{Verb: Predict, Model: "m", Label: "stable"}},
	{name: "label named like a number", method: "POST", path: "/v1/models/m/labels/50:predict", want: Route{Verb: Predict, Model: "m", Label: "50"}},
	{name: "model named versions", method: "POST", path: "/v1/models/versions:predict", want: Route{Verb: Predict, Model: "versions"}},
	{name: "verb upper", method: "POST", path: "/V1/MODELS/m:PREDICT", wantErr: "Malformed request: POST /V1/MODELS/m:PREDICT"},
	{name: "verb title", method: "POST", path: "/v1/models/m:Predict", wantErr: "Malformed request: POST /v1/models/m:Predict"},
	{name: "unknown verb", method: "POST", path: "/v1/models/m:explain", wantErr: "Malformed request: POST /v1/models/m:explain"},
	{name: "post query", method: "POST", path: "/v1/models/m:predict?x=1", wantErr: "Malformed request: POST /v1/models/m:predict?x=1"},
	{name: "post empty query", method: "POST", path: "/v1/models/m:predict?", wantErr: "Malformed request: POST /v1/models/m:predict?"},
	{name: "post no verb", method: "POST", path: "/v1/models/m", wantErr: "Malformed request: POST /v1/models/m"},
	{name: "post models", method: "POST", path: "/v1/models", wantErr: "Malformed request: POST /v1/models"},
	{name: "post metadata", method: "POST", path: "/v1/models/foo/metadata", wantErr: "Malformed request: POST /v1/models/foo/metadata"},
	{name: "post trailing slash", method: "POST", path: "/v1/models/m:predict/", wantErr: "Malformed request: POST /v1/models/m:predict/"},
	{name: "post empty name", method: "POST", path: "/v1/models/:predict", wantErr: "Malformed request: POST /v1/models/:predict"},
	{name: "version and label", method: "POST", path: "/v1/models/foo/versions/50/labels/some_label:regress", wantErr: "Malformed request: POST /v1/models/foo/versions/50/labels/some_label:regress"},
	{name: "version singular", method: "POST", path: "/v1/models/foo/version/50:regress", wantErr: "Malformed request: POST /v1/models/foo/version/50:regress"},
	{name: "label singular", method: "POST", path: "/v1/models/foo/label/some_label:regress", wantErr: "Malformed request: POST /v1/models/foo/label/some_label:regress"},
	{name: "version not numeric", method: "POST", path: "/v1/models/foo/versions/HELLO:regress", wantErr: "Malformed request: POST /v1/models/foo/versions/HELLO:regress"},
	{name: "version negative", method: "POST", path: "/v1/models/m/versions/-1:predict", wantErr: "Malformed request: POST /v1/models/m/versions/-1:predict"},
	{name: "version empty", method: "POST", path: "/v1/models/m/versions/:predict", wantErr: "Malformed request: POST /v1/models/m/versions/:predict"},
	{name: "colon in name", method: "POST", path: "/v1/models/a:b:predict", wantErr: "Malformed request: POST /v1/models/a:b:predict"},
	{name: "double colon", method: "POST", path: "/v1/models/m::predict", wantErr: "Malformed request: POST /v1/models/m::predict"},
	{name: "extra segment", method: "POST", path: "/v1/models/a/b:predict", wantErr: "Malformed request: POST /v1/models/a/b:predict"},
	{name: "post unknown resource", method: "POST", path: "/v1/foo", wantErr: "Malformed request: POST /v1/foo"},

	// Percent-decoding after matching (libcurl: %XX only, "+" stays).
	{name: "escaped slash", method: "POST", path: "/v1/models/a%2Fb:predict", want: Route{Verb: Predict, Model: "a/b"}},
	{name: "escaped colon and verb", method: "POST", path: "/v1/models/m%3Apredict:predict", want: Route{Verb: Predict, Model: "m:predict"}},
	{name: "plus stays", method: "POST", path: "/v1/models/a+b:predict", want: Route{Verb: Predict, Model: "a+b"}},
	{name: "hex both cases", method: "POST", path: "/v1/models/%41%6a%4A:predict", want: Route{Verb: Predict, Model: "AjJ"}},
	{name: "escaped percent", method: "POST", path: "/v1/models/100%25:predict", want: Route{Verb: Predict, Model: "100%"}},
	{name: "escaped NUL", method: "POST", path: "/v1/models/m%00x:predict", want: Route{Verb: Predict, Model: "m\x00x"}},
	{name: "escaped UTF-8", method: "POST", path: "/v1/models/caf%C3%A9:predict", want: Route{Verb: Predict, Model: "café"}},
	{name: "escaped label", method: "POST", path: "/v1/models/m/labels/a%2Fb%20c:predict", want: Route{Verb: Predict, Model: "m", Label: "a/b c"}},
	{name: "sub-delims literal", method: "POST", path: "/v1/models/a!$&'()*,;=@~.-_:predict", want: Route{Verb: Predict, Model: "a!$&'()*,;=@~.-_"}},

	// Targets libevent refuses (TF answers 400 before routing).
	{name: "bad escape in name", method: "POST", path: "/v1/models/a%zz:predict", wantErr: "Failed to decode model name:a%zz"},
	{name: "short escape in name", method: "POST", path: "/v1/models/a%4:predict", wantErr: "Failed to decode model name:a%4"},
	{name: "bad escape in label", method: "POST", path: "/v1/models/m/labels/l%:predict", wantErr: "Failed to decode model version label:l%"},
	{name: "space in name", method: "POST", path: "/v1/models/a b:predict", wantErr: "Failed to decode model name:a b"},
	{name: "raw UTF-8 in name", method: "POST", path: "/v1/models/café:predict", wantErr: "Failed to decode model name:café"},
	{name: "brackets in name", method: "GET", path: "/v1/models/a[0]", wantErr: "Failed to decode model name:a[0]"},
	{name: "bad escape before version overflow", method: "POST", path: "/v1/models/a%zz/versions/99999999999999999999:predict", wantErr: "Failed to decode model name:a%zz"},
	{name: "bad escape in get query", method: "GET", path: "/v1/models/m?x=%zz", wantErr: "Failed to decode model name:m?x=%zz"},
	{name: "second hash", method: "GET", path: "/v1/models/m#a#b", wantErr: "Failed to decode model name:m#a#b"},
	{name: "unicode fold in literal", method: "POST", path: "/v1/modelſ/m:predict", wantErr: "Malformed request: POST /v1/modelſ/m:predict"},
	{name: "bad escape unmatched", method: "POST", path: "/v1/models/m:predict%zz", wantErr: "Malformed request: POST /v1/models/m:predict%zz"},

	// GET status and metadata.
	{name: "status", method: "GET", path: "/v1/models/m", want: Route{Verb: Status, Model: "m"}},
	{name: "status version", method: "GET", path: "/v1/models/m/versions/3", want: Route{Verb: Status, Model: "m", Version: 3, HasVersion: true}},
	{name: "status label", method: "GET", path: "/v1/models/m/labels/canary", want: Route{Verb: Status, Model: "m", Label: "canary"}},
	{name: "metadata", method: "GET", path: "/v1/models/m/metadata", want: Route{Verb: Metadata, Model: "m"}},
	{name: "metadata version", method: "GET", path: "/v1/models/m/versions/3/metadata", want: Route{Verb: Metadata, Model: "m", Version: 3, HasVersion: true}},
	{name: "metadata label", method: "GET", path: "/v1/models/m/labels/l/metadata", want: Route{Verb: Metadata, Model: "m", Label: "l"}},
	{name: "metadata upper is status", method: "GET", path: "/v1/models/m/METADATA", want: Route{Verb: Status, Model: "m"}},
	{name: "metadata title is status", method: "GET", path: "/V1/Models/m/Metadata", want: Route{Verb: Status, Model: "m"}},
	{name: "model named metadata", method: "GET", path: "/v1/models/metadata", want: Route{Verb: Status, Model: "metadata"}},
	{name: "metadata of model metadata", method: "GET", path: "/v1/models/metadata/metadata", want: Route{Verb: Metadata, Model: "metadata"}},
	{name: "model named versions", method: "GET", path: "/v1/models/versions", want: Route{Verb: Status, Model: "versions"}},
	{name: "metadata of model versions", method: "GET", path: "/v1/models/versions/metadata", want: Route{Verb: Metadata, Model: "versions"}},
	{name: "get query is in name", method: "GET", path: "/v1/models/m?x=1", want: Route{Verb: Status, Model: "m?x=1"}},
	{name: "get query in label", method: "GET", path: "/v1/models/m/labels/l?x=1", want: Route{Verb: Status, Model: "m", Label: "l?x=1"}},
	{name: "get query slash breaks", method: "GET", path: "/v1/models/m?a/b", wantErr: "Malformed request: GET /v1/models/m?a/b"},
	{name: "get fragment is in name", method: "GET", path: "/v1/models/m#f", want: Route{Verb: Status, Model: "m#f"}},
	{name: "get escaped query mark", method: "GET", path: "/v1/models/m%3Fx", want: Route{Verb: Status, Model: "m?x"}},
	{name: "get metadata query", method: "GET", path: "/v1/models/m/metadata?x=1", wantErr: "Malformed request: GET /v1/models/m/metadata?x=1"},
	{name: "get version query", method: "GET", path: "/v1/models/m/versions/3?x=1", wantErr: "Malformed request: GET /v1/models/m/versions/3?x=1"},
	{name: "get models query", method: "GET", path: "/v1/models?x=1", wantErr: "Malformed request: GET /v1/models?x=1"},
	{name: "get no name", method: "GET", path: "/v1/models", wantErr: "Missing model name in request."},
	{name: "get no name upper", method: "GET", path: "/V1/MODELS", wantErr: "Missing model name in request."},
	{name: "get version without name", method: "GET", path: "/v1/models/versions/3", wantErr: "Missing model name in request."},
	{name: "get label without name", method: "GET", path: "/v1/models/labels/x", wantErr: "Missing model name in request."},
	{name: "get metadata without name", method: "GET", path: "/v1/models/versions/3/metadata", wantErr: "Missing model name in request."},
	{name: "get version overflow", method: "GET", path: "/v1/models/m/versions/99999999999999999999", wantErr: "Failed to convert version: 99999999999999999999 to numeric."},
	{name: "get version overflow before missing name", method: "GET", path: "/v1/models/versions/99999999999999999999", wantErr: "Failed to convert version: 99999999999999999999 to numeric."},
	{name: "get trailing slash", method: "GET", path: "/v1/models/m/", wantErr: "Malformed request: GET /v1/models/m/"},
	{name: "get models slash", method: "GET", path: "/v1/models/", wantErr: "Malformed request: GET /v1/models/"},
	{name: "get verb", method: "GET", path: "/v1/models/foo:predict", wantErr: "Malformed request: GET /v1/models/foo:predict"},
	{name: "get version singular", method: "GET", path: "/v1/models/foo/version/50:predict", wantErr: "Malformed request: GET /v1/models/foo/version/50:predict"},
	{name: "get extra segment", method: "GET", path: "/v1/models/debug/model_name", wantErr: "Malformed request: GET /v1/models/debug/model_name"},
	{name: "get version and label", method: "GET", path: "/v1/models/m/versions/1/labels/l", wantErr: "Malformed request: GET /v1/models/m/versions/1/labels/l"},
	{name: "get empty label", method: "GET", path: "/v1/models/m/labels/", wantErr: "Malformed request: GET /v1/models/m/labels/"},
	{name: "get unknown resource", method: "GET", path: "/v1/foo", wantErr: "Malformed request: GET /v1/foo"},

	// Methods: only GET and POST are routed; the method is case-sensitive.
	{name: "put", method: "PUT", path: "/v1/models/m", wantErr: "Malformed request: PUT /v1/models/m"},
	{name: "delete", method: "DELETE", path: "/v1/models/m", wantErr: "Malformed request: DELETE /v1/models/m"},
	{name: "head", method: "HEAD", path: "/v1/models/m", wantErr: "Malformed request: HEAD /v1/models/m"},
	{name: "patch predict", method: "PATCH", path: "/v1/models/m:predict", wantErr: "Malformed request: PATCH /v1/models/m:predict"},
	{name: "options", method: "OPTIONS", path: "/v1/models/m:predict", wantErr: "Malformed request: OPTIONS /v1/models/m:predict"},
	{name: "lower-case get", method: "get", path: "/v1/models/m", wantErr: "Malformed request: get /v1/models/m"},
	{name: "put bad target", method: "PUT", path: "/v1/models/a%zz", wantErr: "Malformed request: PUT /v1/models/a%zz"},
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.method, tc.path)
			switch {
			case tc.notTF:
				if !errors.Is(err, ErrNotTFServing) {
					t.Fatalf("Parse(%q, %q) = %+v, %v; want ErrNotTFServing", tc.method, tc.path, got, err)
				}
			case tc.wantErr != "":
				checkAPIErr(t, err, tc.wantErr)
			default:
				if err != nil {
					t.Fatalf("Parse(%q, %q): unexpected error %v", tc.method, tc.path, err)
				}
				if got != tc.want {
					t.Fatalf("Parse(%q, %q) = %+v; want %+v", tc.method, tc.path, got, tc.want)
				}
			}
		})
	}
}

// checkAPIErr asserts that err is TF Serving's INVALID_ARGUMENT (400) with
// exactly msg, and never the pass-through sentinel.
func checkAPIErr(t *testing.T, err error, msg string) {
	t.Helper()
	var ae *apierr.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T); want *apierr.Error %q", err, err, msg)
	}
	if ae.Code != apierr.InvalidArgument || ae.HTTPStatus() != 400 {
		t.Errorf("code %v (HTTP %d); want INVALID_ARGUMENT (400)", ae.Code, ae.HTTPStatus())
	}
	if ae.Msg != msg {
		t.Errorf("message %q; want %q", ae.Msg, msg)
	}
	if errors.Is(err, ErrNotTFServing) {
		t.Errorf("a TF Serving error must not be ErrNotTFServing")
	}
}

func TestUnescape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"a+b", "a+b"},
		{"%41", "A"},
		{"%4a%4A", "JJ"},
		{"%zz", "%zz"},
		{"%", "%"},
		{"%4", "%4"},
		{"a%", "a%"},
		{"%%41", "%A"},
		{"%2541", "%41"}, // one pass only
		{"%00", "\x00"},
		{"%ff%FF", "\xff\xff"},
		{"x%2Fy%3a", "x/y:"},
	}
	for _, tc := range tests {
		if got := unescape(tc.in); got != tc.want {
			t.Errorf("unescape(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestInvalidTargetByte(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"/v1/models/m:predict", -1},
		{"/v1/models/m?x=1&y=/a?b", -1},
		{"/v1/models/m?x#frag?/", -1},
		{"/v1/models/m#a#b", 14},
		{"/v1/models/%41%a", 14},
		{"/v1/models/%4", 11},
		{"/v1/models/a b", 12},
		{"/v1/models/a\x00", 12},
		{"/v1/models/\x80", 11},
		{`/v1/models/a"`, 12},
		{"/v1/models/{}", 11},
		{"/v1/models/a|b", 12},
		{"/v1/models/a\\b", 12},
		{"/v1/models/a^b", 12},
		{"/v1/models/a`b", 12},
		{"/v1/models/<", 11},
		{"/v1/models/[", 11},
	}
	for _, tc := range tests {
		if got := invalidTargetByte(tc.in); got != tc.want {
			t.Errorf("invalidTargetByte(%q) = %d; want %d", tc.in, got, tc.want)
		}
	}
}

// BenchmarkParse compares Parse (the hand-written matcher, "hand") with
// parseOracle (TF Serving's regexes, as Parse was before issue #23,
// "regexp") on the same request lines in the same run.
func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct{ name, method, path string }{
		{"predict", "POST", "/v1/models/half_plus_two:predict"},
		{"predict-version", "POST", "/v1/models/half_plus_two/versions/123:predict"},
		{"status", "GET", "/v1/models/half_plus_two"},
		{"metadata-escaped", "GET", "/v1/models/my%2Fmodel/labels/stable/metadata"},
		{"not-tf", "POST", "/v2/models/half_plus_two/infer"},
	} {
		for _, impl := range []struct {
			name  string
			parse func(method, path string) (Route, error)
		}{{"regexp", parseOracle}, {"hand", Parse}} {
			b.Run(bc.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := impl.parse(bc.method, bc.path); err != nil && !errors.Is(err, ErrNotTFServing) {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// tfPath rebuilds a canonical TF Serving target for r, escaping every byte
// of the model and label that is not RFC 3986 unreserved, so that
// Parse(tfPath(r)) must give r back.
func tfPath(r Route) string {
	var b strings.Builder
	b.WriteString("/v1/models/")
	b.WriteString(escapeAll(r.Model))
	if r.HasVersion {
		b.WriteString("/versions/")
		b.WriteString(strconv.FormatInt(r.Version, 10))
	}
	if r.Label != "" {
		b.WriteString("/labels/")
		b.WriteString(escapeAll(r.Label))
	}
	switch r.Verb {
	case Predict, Classify, Regress:
		b.WriteString(":" + r.Verb.String())
	case Metadata:
		b.WriteString("/metadata")
	}
	return b.String()
}

func escapeAll(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
