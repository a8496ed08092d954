package comparerun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
)

// Request is one TF Serving REST request to replay.
type Request struct {
	Model string `json:"model"`
	// Version or Label, at most one, picks what TF's URL does
	// (/versions/N, /labels/L); neither is the latest version.
	Version string          `json:"version,omitempty"`
	Label   string          `json:"label,omitempty"`
	Verb    string          `json:"verb"` // predict (the default), classify or regress
	Body    json.RawMessage `json:"body"`
	// build makes Body when it is needed (generated requests).
	build func() ([]byte, error)
}

// body returns the request's body, building a generated one.
func (r *Request) body() ([]byte, error) {
	if r.build != nil {
		return r.build()
	}
	return r.Body, nil
}

// modelName is what may stand in a URL path's model segment.
var modelName = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,256}$`)

// versionNumber is a TF version: a non-negative int64 in decimal.
var versionNumber = regexp.MustCompile(`^[0-9]{1,18}$`)

// ParseRequests reads a JSONL file of {"model", "verb", "body"} lines
// (and an optional "version" or "label")
// (blank lines skipped), refusing more than limit of them. An error names
// the line.
func ParseRequests(data []byte, limit int) ([]Request, error) {
	var out []Request
	for n, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(out) == limit {
			return nil, fmt.Errorf("line %d: more than %d requests", n+1, limit)
		}
		var r Request
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no requests")
	}
	return out, nil
}

func (r *Request) check() error {
	if r.Verb == "" {
		r.Verb = "predict"
	}
	switch {
	case !modelName.MatchString(r.Model):
		return fmt.Errorf("model %q: want a model name (letters, digits, _ . -)", r.Model)
	case r.Version != "" && r.Label != "":
		return fmt.Errorf("version %q and label %q: give at most one", r.Version, r.Label)
	case r.Version != "" && !versionNumber.MatchString(r.Version):
		return fmt.Errorf("version %q: want a version number", r.Version)
	case r.Label != "" && !modelName.MatchString(r.Label):
		return fmt.Errorf("label %q: want a label (letters, digits, _ . -)", r.Label)
	case r.Verb != "predict" && r.Verb != "classify" && r.Verb != "regress":
		return fmt.Errorf("verb %q: want predict, classify or regress", r.Verb)
	case len(bytes.TrimSpace(r.Body)) == 0 || bytes.TrimSpace(r.Body)[0] != '{':
		return fmt.Errorf("body: want the request's JSON object")
	}
	return nil
}

// path is the request's TF REST path.
func (r *Request) path() string {
	p := "/v1/models/" + r.Model
	switch {
	case r.Version != "":
		p += "/versions/" + r.Version
	case r.Label != "":
		p += "/labels/" + r.Label
	}
	return p + ":" + r.Verb
}
