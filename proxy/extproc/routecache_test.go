package extproc

import (
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// TestClearRouteCache: the model map's server header comes with
// clear_route_cache, which Envoy honours only next to a header mutation.
func TestClearRouteCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    session.Action
		want bool
	}{
		{"server header set", session.Action{Set: []session.Header{{Key: session.HeaderServer, Value: "onnx"}}, ClearRouteCache: true}, true},
		{"client's header removed", session.Action{Remove: []string{session.HeaderServer}, ClearRouteCache: true}, true},
		{"no routing change", session.Action{Set: []session.Header{{Key: ":path", Value: "/v2/models/m/infer"}}}, false},
	} {
		cr := (&reply{}).common(tc.a)
		if cr.GetClearRouteCache() != tc.want {
			t.Errorf("%s: clear_route_cache = %v, want %v", tc.name, cr.GetClearRouteCache(), tc.want)
		}
		if tc.want && cr.GetHeaderMutation() == nil {
			t.Errorf("%s: clear_route_cache without a header mutation", tc.name)
		}
	}
	if cr := (&reply{}).common(session.Action{ClearRouteCache: true}); cr != nil {
		t.Errorf("an action that changes nothing answered %v", cr)
	}
}
