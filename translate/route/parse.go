package route

import (
	"errors"
	"strconv"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// ErrNotTFServing reports a request target outside TF Serving's REST tree
// ((?i)/v1/.*): not ours, to be passed through untouched (native v2
// traffic, health checks, ...). It is a plain sentinel, not an
// *apierr.Error, because no client must ever see it.
var ErrNotTFServing = errors.New("route: not a TF Serving path")

// TF Serving routes with three RE2 patterns, matched with RE2::FullMatch
// (http_server.cc dispatches, http_rest_api_util.cc parses): match.go
// decides exactly what they decide, with the same captures, including the
// surprising ones: for GET /v1/models/metadata the optional name group wins
// and captures "metadata" (a status request for a model of that name), and
// for GET /v1/models/versions/3 no name is captured at all. The (?i) makes
// the whole path case-insensitive, so the captured verb and subresource
// keep the client's case and are compared case-sensitively afterwards, as
// TF does.

// Capture group numbers shared by the predict and status patterns.
const (
	groupName    = 1
	groupVersion = 2
	groupLabel   = 3
	groupLast    = 4 // verb (POST) or subresource (GET)
)

// Parse routes one request. path is the request target as Envoy's :path
// gives it: path plus "?query". TF Serving matches the query too, so
// "POST /v1/models/m:predict?x=1" is a malformed request and
// "GET /v1/models/m?x=1" asks for the status of a model named "m?x=1".
//
// It returns ErrNotTFServing for targets outside (?i)/v1/.*, and otherwise
// either a Route or an *apierr.Error (INVALID_ARGUMENT, HTTP 400) carrying
// TF Serving's text, checked in TF's order: request-target syntax, the
// method's pattern, name decoding, version conversion, label decoding, then
// the case-sensitive verb, then the missing GET model name.
//
// Methods other than GET and POST are all "Malformed request: M PATH".
// OPTIONS never reaches TF Serving's handler (its CORS preflight answers
// it first), so callers should answer OPTIONS before calling Parse.
func Parse(method, path string) (Route, error) {
	if !isTFServingPath(path) {
		return Route{}, ErrNotTFServing
	}
	var g groups
	var ok bool
	switch method {
	case "POST":
		g, ok = matchPredict(path)
	case "GET":
		g, ok = matchStatus(path)
	}
	if !ok {
		return Route{}, malformed(method, path)
	}
	m := g[:]
	if bad := invalidTargetByte(path); bad >= 0 {
		return Route{}, targetError(method, path, m, bad)
	}

	var r Route
	if name := group(path, m, groupName); name != "" {
		r.Model = unescape(name)
	}
	if digits := group(path, m, groupVersion); digits != "" {
		v, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			// Only overflow can fail here: the pattern admits digits alone.
			return Route{}, apierr.Wrap(apierr.InvalidArgument, err,
				"Failed to convert version: "+digits+" to numeric.")
		}
		r.Version, r.HasVersion = v, true
	}
	if label := group(path, m, groupLabel); label != "" {
		r.Label = unescape(label)
	}

	last := group(path, m, groupLast)
	if method == "POST" {
		switch last {
		case "predict":
			r.Verb = Predict
		case "classify":
			r.Verb = Classify
		case "regress":
			r.Verb = Regress
		default:
			// ":PREDICT" matched the case-insensitive pattern but no verb.
			return Route{}, malformed(method, path)
		}
		return r, nil
	}
	r.Verb = Status
	if last == "metadata" {
		// "/METADATA" falls through to a status request, as in TF Serving.
		r.Verb = Metadata
	}
	if r.Model == "" {
		return Route{}, apierr.New(apierr.InvalidArgument, "Missing model name in request.")
	}
	return r, nil
}

// group returns capture i of a match (FindStringSubmatchIndex's layout), "" when the
// group did not take part (RE2 gives non-participating groups "" too, and
// every group here needs at least one byte when it does).
func group(s string, m []int, i int) string {
	if m[2*i] < 0 {
		return ""
	}
	return s[m[2*i]:m[2*i+1]]
}

// malformed is TF Serving's default answer for anything its patterns and
// verb checks do not accept.
func malformed(method, path string) *apierr.Error {
	return apierr.InvalidArgumentf("Malformed request: %s %s", method, path)
}

// targetError answers a request target that TF Serving's HTTP server
// (libevent's strict evhttp_uri_parse) refuses before any routing, with a
// bare HTML 400. The status is kept; since that HTML page is no JSON error,
// the text is TF's own for an undecodable name or label when the offending
// byte lies in one, and the malformed-request text otherwise.
func targetError(method, path string, m []int, bad int) *apierr.Error {
	in := func(i int) bool { return m[2*i] >= 0 && m[2*i] <= bad && bad < m[2*i+1] }
	switch {
	case in(groupName):
		return apierr.InvalidArgumentf("Failed to decode model name:%s", group(path, m, groupName))
	case in(groupLabel):
		return apierr.InvalidArgumentf("Failed to decode model version label:%s", group(path, m, groupLabel))
	}
	return malformed(method, path)
}
