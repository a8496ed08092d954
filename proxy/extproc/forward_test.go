package extproc

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// TestForwardReply: an exchange forwarded untranslated to a TF Serving
// server of the map (a pass-through with routing) is answered at the
// request headers with the server header, clear_route_cache and the
// pass-through mode (no bodies, no response headers); in full-duplex
// mode, where Envoy ignores mode_override, with the same routing.
func TestForwardReply(t *testing.T) {
	a := session.Action{Verdict: session.PassThrough, Set: []session.Header{{Key: session.HeaderServer, Value: "tf-serving"}}, ClearRouteCache: true}
	for _, tc := range []struct {
		name string
		resp func() (*extprocv3.HeadersResponse, bool)
	}{
		{"buffered", func() (*extprocv3.HeadersResponse, bool) {
			r := headersReply(a, true)
			return r.GetRequestHeaders(), proto.Equal(r.GetModeOverride(), passThroughMode)
		}},
		{"full-duplex", func() (*extprocv3.HeadersResponse, bool) {
			r := duplexHeadersReply(a, true)
			return r.GetRequestHeaders(), r.GetModeOverride() == nil
		}},
	} {
		hr, modeOK := tc.resp()
		cr := hr.GetResponse()
		set := cr.GetHeaderMutation().GetSetHeaders()
		if !modeOK || !cr.GetClearRouteCache() || len(set) != 1 || set[0].GetHeader().GetKey() != session.HeaderServer || string(set[0].GetHeader().GetRawValue()) != "tf-serving" {
			t.Errorf("%s: mode ok %v, reply %v", tc.name, modeOK, hr)
		}
		if cr.GetBodyMutation() != nil || cr.GetStatus() != extprocv3.CommonResponse_CONTINUE {
			t.Errorf("%s: the forwarded request is changed beyond its routing: %v", tc.name, cr)
		}
	}
}
