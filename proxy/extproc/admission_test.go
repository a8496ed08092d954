package extproc

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/poll"
)

// halfPlusTwoAnswer is the binary v2 answer to three instances.
func halfPlusTwoAnswer() (header string, body []byte) {
	header = `{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	return header, append([]byte(header), f32le(2.5, 3, 4.5)...)
}

// In BUFFERED mode an exchange's reservation is released as soon as its
// translated reply is sent, while Envoy keeps the stream open for as long
// as its client takes to read the answer.
func TestBufferedReleasesOnReply(t *testing.T) {
	h := start(t)
	s := h.stream(t)
	exchange(t, s, requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict"))
	exchange(t, s, requestBody([]byte(`{"instances": [1.0, 2.0, 5.0]}`), true))
	if got := h.metrics.Value("tfsbridge_inflight_bytes"); got <= 0 {
		t.Fatalf("%v bytes reserved while the request is upstream, want its reservation", got)
	}
	header, body := halfPlusTwoAnswer()
	exchange(t, s, responseHeaders(false, ":status", "200", "inference-header-content-length", strconv.Itoa(len(header))))
	if resp := exchange(t, s, responseBody(body)); resp.GetResponseBody() == nil {
		t.Fatalf("reply %T, want response_body", resp.GetResponse())
	}
	// The release follows the send on the server's goroutine; the stream
	// stays open.
	if !waitFor(func() bool { return h.metrics.Value("tfsbridge_inflight_bytes") == 0 }) {
		t.Errorf("%v bytes reserved after the reply, with the stream still open; want 0", h.metrics.Value("tfsbridge_inflight_bytes"))
	}
}

// waitFor polls cond until it holds, for effects that land on the server's
// goroutines after the test's last message (nothing signals them); it
// reports whether cond held. The 30 s deadline only bounds a failure: a
// loaded 2-core machine may deschedule the server for seconds.
func waitFor(cond func() bool) bool {
	return poll.Until(30*time.Second, cond)
}

// In full-duplex mode, an answer Envoy stops pulling (its client does not
// read) ends the stream after the write timeout, releasing the budget.
func TestFullDuplexWriteTimeout(t *testing.T) {
	const writeTimeout = 200 * time.Millisecond
	h := startOpts(t, ServerOptions{}, Options{WriteTimeout: writeTimeout})
	s := h.stream(t)
	if err := s.Send(withConfig(requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict"), fullDuplex)); err != nil {
		t.Fatal(err)
	}
	sendChunks(t, s, []byte(`{"instances": [1.0, 2.0, 5.0]}`), 8, true)
	if _, err := s.Recv(); err != nil { // the request headers reply
		t.Fatal(err)
	}
	streamedBody(t, s, true)
	header, body := halfPlusTwoAnswer()
	if err := s.Send(responseHeaders(false, ":status", "200", "inference-header-content-length", strconv.Itoa(len(header)))); err != nil {
		t.Fatal(err)
	}
	// Part of the answer, then silence.
	if err := s.Send(chunkMsg(body[:20], false, false)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := h.processResult(t); !errors.Is(err, errWriteTimeout) {
		t.Fatalf("Process = %v, want the write timeout", err)
	}
	if d := time.Since(start); d < writeTimeout {
		t.Errorf("stream ended after %v, before the write timeout %v", d, writeTimeout)
	}
	if got := h.metrics.Value("tfsbridge_inflight_bytes"); got != 0 {
		t.Errorf("%v bytes reserved after the stream ended, want 0", got)
	}
	if got := h.metrics.Value("tfsbridge_response_write_timeouts_total"); got != 1 {
		t.Errorf("write timeouts counted: %v, want 1", got)
	}
}
