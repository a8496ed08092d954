package session

import (
	"fmt"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/route"
)

// Passthrough is the policy for requests that are not TF Serving REST
// calls: which of them reach the v2 server untouched. tfsbridge sits on
// the port TF clients use, in front of a server whose control plane
// (Triton's model repository, shared memory, trace and logging settings)
// can unload models or reconfigure it; a TF client, or anyone who can
// reach that port, must not get there by default.
//
// RequestHeaders passes through only what the policy allows and answers
// the rest with a TF-style 404 at once. The zero value is
// PassthroughInference, the default.
type Passthrough uint8

const (
	// PassthroughInference passes the Open Inference Protocol's own REST
	// endpoints (route.Endpoint.Inference): health, server metadata,
	// model metadata, model readiness and inference. Triton's /config and
	// /stats are not among them: they are server extensions that describe
	// the deployment (backends, instance groups, file names, traffic
	// counters) rather than serve inferences, and no v2 client needs them
	// to infer.
	PassthroughInference Passthrough = iota
	// PassthroughNone passes nothing: tfsbridge serves TF Serving's API
	// only.
	PassthroughNone
	// PassthroughAll passes every other request, whatever its path or
	// method, as a plain reverse proxy would.
	PassthroughAll
)

var passthroughNames = [...]string{
	PassthroughInference: "inference",
	PassthroughNone:      "none",
	PassthroughAll:       "all",
}

// String returns the policy's flag value.
func (p Passthrough) String() string {
	if int(p) < len(passthroughNames) {
		return passthroughNames[p]
	}
	return fmt.Sprintf("Passthrough(%d)", p)
}

// MarshalText implements encoding.TextMarshaler (flag.TextVar).
func (p Passthrough) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler: "none", "inference"
// or "all".
func (p *Passthrough) UnmarshalText(b []byte) error {
	for i, name := range passthroughNames {
		if string(b) == name {
			*p = Passthrough(i)
			return nil
		}
	}
	return fmt.Errorf("invalid pass-through policy %q: want none, inference or all", b)
}

// allows reports whether a request outside TF Serving's API (method and
// request target as sent) may go to the v2 server.
func (p Passthrough) allows(method, target string) bool {
	switch p {
	case PassthroughAll:
		return true
	case PassthroughInference:
		return route.ParseV2(method, target).Inference()
	}
	return false
}

// refused is the answer to a request the policy does not pass: TF Serving's
// own server has no handler outside /v1/ either, and answers 404.
func (p Passthrough) refused(method, target string) *apierr.Error {
	what := "a TF Serving REST call"
	if p == PassthroughInference {
		what += " or a v2 inference call"
	}
	return apierr.Errorf(apierr.NotFound, "Not found: %s %s is not %s", method, target, what)
}
