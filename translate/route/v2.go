package route

import "strings"

// The Open Inference Protocol's own REST grammar, for requests that are
// not TF Serving's: which of them a deployment lets through to the v2
// server is the session's decision (see Endpoint), the grammar is here.

// Endpoint classifies a request target under /v2.
type Endpoint uint8

// The v2 endpoints tfsbridge tells apart. EndpointOther is everything
// else, under /v2 or not.
const (
	// EndpointOther is not one of the protocol's endpoints below: the
	// v2 server's control plane (Triton's repository, shared memory,
	// trace, logging, /stats), anything outside /v2, a wrong method, or a
	// path that a normalising hop could turn into another one.
	EndpointOther Endpoint = iota
	// EndpointHealth is GET /v2/health/live or /v2/health/ready.
	EndpointHealth
	// EndpointServerMetadata is GET /v2.
	EndpointServerMetadata
	// EndpointModelMetadata is GET /v2/models/M[/versions/V].
	EndpointModelMetadata
	// EndpointModelReady is GET /v2/models/M[/versions/V]/ready.
	EndpointModelReady
	// EndpointInfer is POST /v2/models/M[/versions/V]/infer.
	EndpointInfer
	// EndpointModelConfig is GET /v2/models/M[/versions/V]/config,
	// Triton's model configuration extension.
	EndpointModelConfig
)

// Inference reports an endpoint of the Open Inference Protocol's REST
// API proper (health, server and model metadata, model readiness,
// inference), which every v2 server implements. Triton's extensions,
// /config included, are not: they describe or steer the server rather
// than serve inferences.
func (e Endpoint) Inference() bool {
	return e >= EndpointHealth && e <= EndpointInfer
}

// ParseV2 classifies a request (method, and target as sent: path and
// "?query"). The query is ignored. GET endpoints also accept HEAD.
//
// A model or version segment must be one that every hop between here and
// the v2 server reads the same way: not empty, and not a dot segment nor
// one that decodes to a "/" or "\" (see SafeSegment). Anything else is
// EndpointOther, so that "/v2/models/../repository/models/m/unload" can
// never be let through as model metadata.
func ParseV2(method, target string) Endpoint {
	path, _, _ := strings.Cut(target, "?")
	get := method == "GET" || method == "HEAD"
	switch path {
	case "/v2":
		return pick(get, EndpointServerMetadata)
	case "/v2/health/live", "/v2/health/ready":
		return pick(get, EndpointHealth)
	}
	rest, ok := strings.CutPrefix(path, "/v2/models/")
	if !ok {
		return EndpointOther
	}
	segs := strings.Split(rest, "/")
	// M [versions V] [verb]
	model, segs := segs[0], segs[1:]
	if !SafeSegment(unescape(model)) {
		return EndpointOther
	}
	if len(segs) >= 2 && segs[0] == "versions" {
		if !SafeSegment(unescape(segs[1])) {
			return EndpointOther
		}
		segs = segs[2:]
	}
	switch {
	case len(segs) == 0:
		return pick(get, EndpointModelMetadata)
	case len(segs) > 1:
		return EndpointOther
	}
	switch segs[0] {
	case "ready":
		return pick(get, EndpointModelReady)
	case "config":
		return pick(get, EndpointModelConfig)
	case "infer":
		return pick(method == "POST", EndpointInfer)
	}
	return EndpointOther
}

func pick(ok bool, e Endpoint) Endpoint {
	if ok {
		return e
	}
	return EndpointOther
}

// SafeSegment reports whether a decoded name can be sent as one escaped
// v2 path segment that names it and nothing else, through any hop.
//
// Escaping alone cannot protect "." and "..": RFC 3986 §6.2.2.2 lets a
// normaliser decode "%2E" (an unreserved character), and Envoy's
// normalize_path, nginx and most URL libraries then remove the dot segment
// it forms, turning /v2/models/%2E%2E/infer into /v2/infer. Hops that
// also decode "%2F" or "%5C" into separators (Envoy's
// path_with_escaped_slashes_action, WHATWG URL parsers for "\") would do
// the same to a dot piece inside a name such as "../x" or "a\..". So a
// name is unsafe when it is empty, or when any piece of it between "/" or
// "\" is "." or "..". Such names can only come from hostile URLs (model
// names are directory or Kubernetes names), and are answered as unknown
// servables.
func SafeSegment(name string) bool {
	if name == "" {
		return false
	}
	for piece := range strings.FieldsFuncSeq(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if piece == "." || piece == ".." {
			return false
		}
	}
	// FieldsFunc drops empty pieces: "./" has the piece "." and is caught;
	// a lone "." or ".." is caught too, as a single piece.
	return true
}

// V2Safe reports whether the route's model can be named in a v2 path
// (see SafeSegment). A route for which it is false must be answered as an
// unknown servable without calling the v2 server: its v2 paths would name
// another resource behind any normalising hop.
func (r Route) V2Safe() bool { return SafeSegment(r.Model) }
