package extproc

import (
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/inflight"
)

// TestShutdownCut: a stream still in progress when the shutdown's time
// runs out is cut and counted. A full-duplex stream that withholds a
// headers reply (its request body still arriving) answers TF's 503 first:
// Envoy awaits a reply there, so an immediate_response is one. A stream
// whose request is at the v2 server has no message to answer (an
// immediate_response then is spurious to Envoy), so it is just closed and
// Envoy answers.
func TestShutdownCut(t *testing.T) {
	for _, tc := range []struct {
		name          string
		duplex, whole bool // full-duplex mode; the whole request body sent
		answered      bool
	}{
		{"full-duplex body arriving", true, false, true},
		{"full-duplex at the v2 server", true, true, false},
		{"buffered at the v2 server", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t)
			s := h.stream(t)
			first := requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict", "content-type", "application/json")
			body := []byte(`{"instances": [1.0]}`)
			switch {
			case tc.duplex && !tc.whole:
				if err := s.Send(withConfig(first, fullDuplex)); err != nil {
					t.Fatal(err)
				}
				if err := s.Send(chunkMsg(body[:5], false, true)); err != nil {
					t.Fatal(err)
				}
				// The processor only has to take the chunk in.
				if !waitFor(func() bool { return h.srv.proc.holding.Load() == 1 }) {
					t.Fatal("the stream never withheld its headers reply")
				}
			case tc.duplex:
				if err := s.Send(withConfig(first, fullDuplex)); err != nil {
					t.Fatal(err)
				}
				sendChunks(t, s, body, len(body), true)
				if resp, err := s.Recv(); err != nil || resp.GetRequestHeaders() == nil {
					t.Fatalf("first reply %v, %v", resp, err)
				}
				_ = streamedBody(t, s, true)
			default:
				exchange(t, s, first)
				exchange(t, s, requestBody(body, true))
			}
			stopped := make(chan struct{})
			go func() { h.srv.Shutdown(0); close(stopped) }()
			resp, err := s.Recv()
			ir := resp.GetImmediateResponse()
			if tc.answered {
				if err != nil || ir.GetStatus().GetCode() != 503 || !strings.Contains(string(ir.GetBody()), inflight.MsgShutdown) {
					t.Errorf("reply %v, %v; want TF's 503", resp, err)
				}
			} else if err == nil {
				t.Errorf("got %v, want the stream closed without a reply", resp)
			}
			_ = s.CloseSend()
			<-stopped
			if st := h.srv.Stats(); st.Cut != 1 || st.Drained != 0 {
				t.Errorf("stats %+v, want 1 cut", st)
			}
		})
	}
}

// TestCutWithoutHeldReply: a cut that finds no headers reply withheld (the
// request already at the v2 server) needs no action, and must not run the
// stream's last message (the request body) through the session again: the
// next reply is the one to the next message.
func TestCutWithoutHeldReply(t *testing.T) {
	h := start(t)
	s := h.stream(t)
	first := requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict", "content-type", "application/json")
	if err := s.Send(withConfig(first, fullDuplex)); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"instances": [1.0]}`)
	sendChunks(t, s, body, len(body), true)
	if resp, err := s.Recv(); err != nil || resp.GetRequestHeaders() == nil {
		t.Fatalf("first reply %v, %v", resp, err)
	}
	_ = streamedBody(t, s, true)
	if n := h.srv.proc.Inflight().Cut(); n != 1 {
		t.Fatalf("cut %d streams, want 1", n)
	}
	// A body-less answer is replied to at once (here TF's 502: no v2
	// body to translate).
	if err := s.Send(responseHeaders(true, ":status", "200", "inference-header-content-length", "10")); err != nil {
		t.Fatal(err)
	}
	if resp, err := s.Recv(); err == nil && resp.GetRequestBody() != nil {
		t.Errorf("reply %v, want none to the request body again", resp)
	}
}
