package robustness

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/translate/oip"
)

// Envoy in front of tfsbridge has limits and timeouts of its own. These
// tests pin down, through the stand-in, which of Envoy's failures a TF
// client gets as TF's error and which stay Envoy's (README, "Behind
// Envoy: limits and timeouts").

// padHeader makes padUpstream answer an infer call with a chunked 200 of
// that many bytes (valid JSON padded with spaces, no content-length).
const padHeader = "X-Pad-Response"

// padUpstream is mockv2 imitating Triton, except for infer calls carrying
// padHeader.
func padUpstream(t *testing.T) string {
	t.Helper()
	m, err := mockv2.New(mockv2.Options{Kind: "triton"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.Header.Get(padHeader))
		if err != nil || !strings.HasSuffix(r.URL.Path, "/infer") {
			m.ServeHTTP(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // chunked: no length to refuse early
		_, _ = io.WriteString(w, `{"outputs":[]}`+strings.Repeat(" ", n))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestBodiesBetweenLimits: Envoy's buffer limit (8 MiB) far above
// --max-body-bytes (1 MiB). A body between the two reaches tfsbridge as
// one gRPC message larger than the body limit plus framing; it must get
// TF's 413 (request) or 502 (response), not the bare 500 Envoy answers
// for a message over the processor's gRPC receive limit. A declared
// request body over the limit is refused at its headers, and one over
// Envoy's own buffer gets Envoy's 413, which the session turns into TF's.
func TestBodiesBetweenLimits(t *testing.T) {
	s := newStack(t, patient(stackConfig{upstream: padUpstream(t), bufferLimit: 8 << 20}))
	padded := func(n int) []byte { return []byte(`{"instances":[1.0]}` + strings.Repeat(" ", n)) }
	tooLarge := "Request body exceeds the limit of 1048576 bytes"
	for _, tc := range []struct {
		name   string
		body   []byte
		hdr    map[string]string
		status int
		msg    string
		// both: run through the proxy too. A multi-MiB request the proxy
		// refuses unread is cut by a reset while the client still writes
		// (net/http closes such connections), so those are extproc only.
		both bool
		// atHeaders: Envoy sends tfsbridge the request headers only.
		atHeaders bool
	}{
		{name: "declared, between", body: padded(4 << 20), status: 413, msg: tooLarge, atHeaders: true},
		{name: "chunked, between", body: padded(4 << 20), hdr: map[string]string{"Transfer-Encoding": "chunked"}, status: 413, msg: tooLarge},
		{name: "declared, over Envoy's buffer", body: padded(9 << 20), status: 413, msg: tooLarge, atHeaders: true},
		{name: "chunked, over Envoy's buffer", body: padded(9 << 20), hdr: map[string]string{"Transfer-Encoding": "chunked"}, status: 413, msg: tooLarge},
		{name: "response chunked, between", body: padded(0), hdr: map[string]string{padHeader: strconv.Itoa(4 << 20)},
			status: 502, msg: "Response body exceeds the limit of 1048576 bytes", both: true},
	} {
		vias := []string{viaExtproc}
		if tc.both {
			vias = transports
		}
		for _, via := range vias {
			t.Run(tc.name+" via "+via, func(t *testing.T) {
				hdr := map[string]string{"Connection": "close"} // the body may be left unread
				for k, v := range tc.hdr {
					hdr[k] = v
				}
				sent := s.env.Stats().StreamMsgsSent
				a := s.send(via, http.MethodPost, "/v1/models/half_plus_two:predict", tc.body, hdr)
				checkAnswer(t, tc.name, a, tc.status, tc.msg)
				if n := s.env.Stats().StreamMsgsSent - sent; via == viaExtproc && tc.atHeaders && n != 1 {
					t.Errorf("%d ext_proc messages, want the request headers only", n)
				}
			})
		}
	}
	if st := s.env.Stats(); st.StreamsFailed != 0 {
		t.Errorf("%d ext_proc streams failed (a gRPC error is Envoy's bare 500)", st.StreamsFailed)
	}
	if v := s.env.Violations(); len(v) > 0 {
		t.Errorf("protocol violations: %v", v)
	}
}

// TestMessageTimeout: when tfsbridge itself does not answer within
// ext_proc's message_timeout (here a metadata fetch slower than it), the
// answer is Envoy's — fail closed, a bare 504 ext_proc_error_per-message_timeout_exceeded;
// fail open, the untranslated TF request goes to the v2 server, which does
// not know the path — and tfsbridge cannot change it. Hence
// --backend-timeout below message_timeout, which makes the same failure
// TF's 504 (meta_slow in TestHostileUpstream).
func TestMessageTimeout(t *testing.T) {
	for _, tc := range []struct {
		name      string
		allow     bool
		status    int
		body      string
		untouched bool // the TF request reached the v2 server as sent
	}{
		{name: "fail closed", status: 504},
		{name: "fail open", allow: true, status: 404, body: `{"error":"Not Found"}`, untouched: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHostile(t)
			s := newStack(t, stackConfig{upstream: h.URL(), messageTimeout: 300 * time.Millisecond,
				backendTimeout: 3 * time.Second, failureModeAllow: tc.allow})
			a := s.post(viaExtproc, "/v1/models/meta_slow:predict", []byte(`{"instances":[1.0]}`))
			if a.err != nil || a.status != tc.status || a.body != tc.body {
				t.Errorf("got %d %q %v, want Envoy's %d %q", a.status, a.body, a.err, tc.status, tc.body)
			}
			if got := h.Hits("/v1/models/meta_slow:predict") == 1; got != tc.untouched {
				t.Errorf("untranslated request at the v2 server: %v, want %v", got, tc.untouched)
			}
			if st := s.env.Stats(); st.MessageTimeouts != 1 || (st.FailureModeAllowed == 1) != tc.allow {
				t.Errorf("message_timeouts %d, failure_mode_allowed %d", st.MessageTimeouts, st.FailureModeAllowed)
			}
		})
	}
}

// TestRouteTimeoutTexts: the route timeout before the v2 server's headers
// reaches ext_proc as Envoy's local reply and becomes the proxy's TF 504;
// after them (a body still dripping) Envoy's own 504 bypasses ext_proc
// (TestHostileUpstream, slowloris).
func TestRouteTimeoutTexts(t *testing.T) {
	h := startHostile(t)
	s := newStack(t, stackConfig{upstream: h.URL(), routeTimeout: 300 * time.Millisecond, requestTimeout: 300 * time.Millisecond})
	for _, via := range transports {
		a := s.post(via, "/v1/models/slow_headers:predict", []byte(`{"instances":[1.0]}`))
		checkAnswer(t, "slow_headers via "+via, a, 504, oip.MsgTimeout)
	}
}
