package extproc

import (
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tfsbridge/tfsbridge/proxy/inflight"
)

// TestShutdownCut: a stream still in progress when the shutdown's time
// runs out is cut and counted. In full-duplex mode, with its response not
// begun, it first answers TF's 503 (Envoy takes an immediate_response at
// any time until the response headers reply); a buffered stream has no
// message to answer, so it is just closed.
func TestShutdownCut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		duplex bool
	}{{"full-duplex", true}, {"buffered", false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t)
			s := h.stream(t)
			first := requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict", "content-type", "application/json")
			body := []byte(`{"instances": [1.0]}`)
			if tc.duplex {
				if err := s.Send(withConfig(first, fullDuplex)); err != nil {
					t.Fatal(err)
				}
				sendChunks(t, s, body, len(body), true)
				if resp, err := s.Recv(); err != nil || resp.GetRequestHeaders() == nil {
					t.Fatalf("first reply %v, %v", resp, err)
				}
				_ = streamedBody(t, s, true)
			} else {
				exchange(t, s, first)
				exchange(t, s, requestBody(body, true))
			}
			// The request is at the v2 server now: stop with no time left.
			stopped := make(chan struct{})
			go func() { h.srv.Shutdown(0); close(stopped) }()
			resp, err := s.Recv()
			if tc.duplex {
				ir := resp.GetImmediateResponse()
				if err != nil || ir.GetStatus().GetCode() != 503 || !strings.Contains(string(ir.GetBody()), inflight.MsgShutdown) {
					t.Errorf("reply %v, %v; want TF's 503", resp, err)
				}
			} else if err == nil {
				t.Errorf("buffered stream got %v, want it closed", resp)
			}
			_ = s.CloseSend()
			<-stopped
			if st := h.srv.Stats(); st.Cut != 1 || st.Drained != 0 {
				t.Errorf("stats %+v, want 1 cut", st)
			}
			if _, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_ImmediateResponse); ok != tc.duplex {
				t.Errorf("immediate response sent: %v", ok)
			}
		})
	}
}
