// Package route turns a TF Serving REST request line (method and request
// target) into a Route, the plan for one request, and builds the Open
// Inference Protocol (v2) paths that serve it.
//
// The grammar is TF Serving's own (http_rest_api_util.cc, ParseModelInfo),
// with its surprises kept: the query string is part of the matched path,
// the path is case-insensitive but the verb and the "metadata" subresource
// are not, and model names and labels are percent-decoded after matching.
package route

import (
	"net/url"
	"strconv"
	"strings"
)

// Verb is what a TF Serving request asks for. The zero value is no verb:
// a Route that Parse did not produce.
type Verb uint8

// The verbs: three POST inference methods and two GET reads.
const (
	// Predict is POST …:predict.
	Predict Verb = iota + 1
	// Classify is POST …:classify.
	Classify
	// Regress is POST …:regress.
	Regress
	// Status is GET /v1/models/NAME[…] (model version status).
	Status
	// Metadata is GET /v1/models/NAME[…]/metadata (signature metadata).
	Metadata
)

var verbNames = [...]string{
	Predict:  "predict",
	Classify: "classify",
	Regress:  "regress",
	Status:   "status",
	Metadata: "metadata",
}

// String returns the verb as TF Serving spells it in URLs ("predict"), or
// "status" / "metadata" for the GET requests.
func (v Verb) String() string {
	if int(v) < len(verbNames) && verbNames[v] != "" {
		return verbNames[v]
	}
	return "Verb(" + strconv.Itoa(int(v)) + ")"
}

// Route is one parsed TF Serving request. Model and Label are already
// percent-decoded, so they may hold any byte ("/", ":", "?", even NUL).
// At most one of HasVersion and Label is set: the grammar allows a version
// or a label, never both.
type Route struct {
	// Verb is what the request asks for.
	Verb Verb
	// Model is the decoded model name; never empty after a successful Parse.
	Model string
	// Version is the requested version, meaningful only when HasVersion.
	Version int64
	// HasVersion reports a /versions/N segment.
	HasVersion bool
	// Label is the decoded /labels/L segment, "" when absent. v2 has no
	// labels: the caller decides what a label means (TF answers predict and
	// metadata with "Unrecognized servable version label: L" for unknown
	// labels, while status ignores the label altogether).
	Label string
}

// V2ModelPath returns "/v2/models/{m}[/versions/{v}]". The model name is
// escaped as one path segment, so a decoded "/" or "?" cannot change the
// shape of the v2 path, and a name "." or ".." is written "%2E" or
// "%2E%2E" rather than as a dot segment. That is not enough on its own (a
// normalising hop may decode the dots again): callers must not send the
// paths of a route that is not V2Safe. The version appears only when
// HasVersion; labels have no v2 form and are left out.
func (r Route) V2ModelPath() string { return r.v2Path("") }

// v2Path is V2ModelPath()+suffix, built in one allocation.
func (r Route) v2Path(suffix string) string {
	var b strings.Builder
	b.Grow(len("/v2/models/") + 3*len(r.Model) + len("/versions/") + 20 + len(suffix))
	b.WriteString("/v2/models/")
	b.WriteString(escapeSegment(r.Model))
	if r.HasVersion {
		b.WriteString("/versions/")
		b.WriteString(strconv.FormatInt(r.Version, 10))
	}
	b.WriteString(suffix)
	return b.String()
}

// escapeSegment escapes name as one path segment that no URL resolver
// takes for a dot segment.
func escapeSegment(name string) string {
	if name == "." || name == ".." {
		return strings.Repeat("%2E", len(name))
	}
	return url.PathEscape(name)
}

// V2InferPath returns V2ModelPath()+"/infer".
func (r Route) V2InferPath() string { return r.v2Path("/infer") }

// V2ReadyPath returns V2ModelPath()+"/ready".
func (r Route) V2ReadyPath() string { return r.v2Path("/ready") }

// V2ConfigPath returns V2ModelPath()+"/config", Triton's model
// configuration endpoint (max_batch_size tells whether dimension 0 is the
// batch).
func (r Route) V2ConfigPath() string { return r.v2Path("/config") }

// Servable returns the servable request as TF Serving prints it in its
// not-found messages (ServableRequest::DebugString): "Specific(m, 50)" with
// a version, "Latest(m)" without. A label has no text of its own there: TF
// resolves it to a version first (or fails with "Unrecognized servable
// version label"), so for a label route this is "Latest(m)" and the caller
// must deal with the label before using it.
func (r Route) Servable() string {
	if r.HasVersion {
		return "Specific(" + r.Model + ", " + strconv.FormatInt(r.Version, 10) + ")"
	}
	return "Latest(" + r.Model + ")"
}

// String describes the route for logs, with the model and label quoted so
// that decoded control bytes cannot forge log lines:
// `predict "m" version 50`, `status "m" label "stable"`.
func (r Route) String() string {
	s := r.Verb.String() + " " + strconv.Quote(r.Model)
	if r.HasVersion {
		s += " version " + strconv.FormatInt(r.Version, 10)
	}
	if r.Label != "" {
		s += " label " + strconv.Quote(r.Label)
	}
	return s
}
