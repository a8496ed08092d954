package route

import (
	"errors"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// urlInput and urlExpected are the shapes of the url-* vectors.
type urlInput struct {
	Method string `json:"method"`
	Path   string `json:"path"`
}

type urlExpected struct {
	Error *struct {
		HTTPStatus       int    `json:"http_status"`
		MessageSubstring string `json:"message_substring"`
	} `json:"error"`
	Parsed *struct {
		ModelName   string `json:"model_name"`
		Version     *int64 `json:"version"`
		Label       string `json:"label"`
		Method      string `json:"method"`
		Subresource string `json:"subresource"`
	} `json:"parsed"`
	HTTPStatus int    `json:"http_status"`
	BodyKind   string `json:"body_kind"`
}

// TestConformanceURL runs every url-* vector of tfserving_cases.json.
// Some vectors describe what TF Serving answers after routing (a model or
// label lookup, a status body): for those the route layer must produce
// exactly the servable, label or verb the answer is about.
func TestConformanceURL(t *testing.T) {
	n := 0
	for _, c := range conformance.MustLoad(t, "tfserving_cases.json") {
		if !strings.HasPrefix(c.ID, "url-") {
			continue
		}
		n++
		t.Run(c.ID, func(t *testing.T) {
			var in urlInput
			var want urlExpected
			conformance.Decode(t, c.Input, &in)
			conformance.Decode(t, c.Expected, &want)
			r, err := Parse(in.Method, in.Path)
			if errors.Is(err, ErrNotTFServing) {
				t.Fatalf("Parse(%q, %q): ErrNotTFServing for a /v1/ vector", in.Method, in.Path)
			}
			switch {
			case want.Parsed != nil:
				checkParsed(t, r, err, in, want)
			case want.Error != nil && err != nil:
				ae := apierr.As(err)
				if ae.HTTPStatus() != want.Error.HTTPStatus {
					t.Errorf("HTTP %d; want %d (%v)", ae.HTTPStatus(), want.Error.HTTPStatus, err)
				}
				if !strings.Contains(ae.Msg, want.Error.MessageSubstring) {
					t.Errorf("message %q; want it to contain %q", ae.Msg, want.Error.MessageSubstring)
				}
			case want.Error != nil:
				checkLookupError(t, r, want.Error.HTTPStatus, want.Error.MessageSubstring)
			case want.HTTPStatus == 200:
				checkBodyKind(t, r, err, want.BodyKind)
			default:
				t.Fatalf("vector shape not understood: %s", c.Expected)
			}
		})
	}
	if n == 0 {
		t.Fatal("no url-* vectors found")
	}
}

func checkParsed(t *testing.T, r Route, err error, in urlInput, want urlExpected) {
	t.Helper()
	p := want.Parsed
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v; want a route", in.Method, in.Path, err)
	}
	if r.Model != p.ModelName {
		t.Errorf("model %q; want %q", r.Model, p.ModelName)
	}
	if r.Label != p.Label {
		t.Errorf("label %q; want %q", r.Label, p.Label)
	}
	if (p.Version != nil) != r.HasVersion || p.Version != nil && *p.Version != r.Version {
		t.Errorf("version %d (has %v); want %v", r.Version, r.HasVersion, p.Version)
	}
	wantVerb := Status
	switch {
	case p.Method != "":
		wantVerb = map[string]Verb{"predict": Predict, "classify": Classify, "regress": Regress}[p.Method]
	case p.Subresource == "metadata":
		wantVerb = Metadata
	}
	if r.Verb != wantVerb {
		t.Errorf("verb %v; want %v", r.Verb, wantVerb)
	}
}

// checkLookupError handles vectors whose error TF Serving raises after
// routing, while resolving the servable: the route must parse, and name
// the servable or carry the label the message is about.
func checkLookupError(t *testing.T, r Route, status int, substr string) {
	t.Helper()
	switch {
	case status == 404 && strings.HasPrefix(substr, "Servable not found for request: "):
		if got := "Servable not found for request: " + r.Servable(); got != substr {
			t.Errorf("route %v gives %q; want %q", r, got, substr)
		}
	case status == 400 && strings.HasPrefix(substr, "Unrecognized servable version label"):
		if r.Label == "" || r.HasVersion {
			t.Errorf("route %v: want a label route", r)
		}
	default:
		t.Errorf("route %v parsed, but the vector wants error %d %q", r, status, substr)
	}
}

// checkBodyKind handles vectors that succeed with a status or metadata
// body: the route must pick that body.
func checkBodyKind(t *testing.T, r Route, err error, kind string) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error %v; want a %s", err, kind)
	}
	want := Status
	if strings.Contains(kind, "metadata") {
		want = Metadata
	}
	if r.Verb != want {
		t.Errorf("verb %v; want %v for %q", r.Verb, want, kind)
	}
}
