package extproc

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	procmodev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// fullDuplex is the protocol_config Envoy sends with FULL_DUPLEX_STREAMED
// both ways.
var fullDuplex = &extprocv3.ProtocolConfiguration{
	RequestBodyMode:  procmodev3.ProcessingMode_FULL_DUPLEX_STREAMED,
	ResponseBodyMode: procmodev3.ProcessingMode_FULL_DUPLEX_STREAMED,
}

func withConfig(m *extprocv3.ProcessingRequest, pc *extprocv3.ProtocolConfiguration) *extprocv3.ProcessingRequest {
	m.ProtocolConfig = pc
	return m
}

func chunkMsg(b []byte, eos, request bool) *extprocv3.ProcessingRequest {
	body := &extprocv3.HttpBody{Body: b, EndOfStream: eos}
	if request {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: body}}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: body}}
}

// sendChunks sends body in pieces of n bytes (the last with eos), and
// fails if the processor answers any of them before the last.
func sendChunks(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient, body []byte, n int, request bool) {
	t.Helper()
	for len(body) > 0 {
		k := min(n, len(body))
		if err := s.Send(chunkMsg(body[:k], k == len(body), request)); err != nil {
			t.Fatal(err)
		}
		body = body[k:]
	}
}

// streamedBody reads body replies until end_of_stream and returns their
// concatenation, checking each is a streamed_response of at most 64 KiB.
func streamedBody(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient, request bool) []byte {
	t.Helper()
	var out []byte
	for {
		resp, err := s.Recv()
		if err != nil {
			t.Fatalf("recv body reply: %v", err)
		}
		br := resp.GetResponseBody()
		if request {
			br = resp.GetRequestBody()
		}
		sr := br.GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil {
			t.Fatalf("reply %v, want a streamed_response body reply", resp)
		}
		if len(sr.GetBody()) > 64<<10 {
			t.Errorf("chunk of %d bytes, over 64 KiB", len(sr.GetBody()))
		}
		out = append(out, sr.GetBody()...)
		if sr.GetEndOfStream() {
			return out
		}
	}
}

// TestFullDuplexExchange drives one predict exchange in full-duplex mode,
// the body cut in several ways: the request-headers reply is held until
// the body is translated, then carries :path and the v2 headers, then the
// v2 body follows as streamed chunks; the response likewise. The bytes
// must be those of the buffered mode.
func TestFullDuplexExchange(t *testing.T) {
	h := start(t)
	tfBody := []byte(`{"instances": [1.0, 2.0, 5.0]}`)
	header := `{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	v2Resp := append([]byte(header), f32le(2.5, 3, 4.5)...)
	wantTF := "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"
	for _, n := range []int{1, 3, 7, 16, len(tfBody)} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			s := h.stream(t)
			if err := s.Send(withConfig(requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict",
				"content-type", "application/json", "x-request-id", "fd-1"), fullDuplex)); err != nil {
				t.Fatal(err)
			}
			sendChunks(t, s, tfBody, n, true)
			resp, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			rh := resp.GetRequestHeaders()
			if rh == nil || resp.GetModeOverride() != nil {
				t.Fatalf("first reply %v, want request_headers without mode_override", resp)
			}
			set := setHeaders(t, rh.GetResponse().GetHeaderMutation())
			body := streamedBody(t, s, true)
			ihcl, _ := strconv.Atoi(set["inference-header-content-length"])
			if set[":path"] != "/v2/models/half_plus_two/infer" || set["content-length"] != strconv.Itoa(len(body)) ||
				ihcl <= 0 || len(body)-ihcl != 12 || !bytes.Equal(body[ihcl:], f32le(1, 2, 5)) {
				t.Errorf("headers %v and body %q", set, body)
			}
			if !strings.Contains(string(body[:ihcl]), `"id":"fd-1"`) {
				t.Errorf("v2 header %s lacks the request id", body[:ihcl])
			}

			if err := s.Send(responseHeaders(false, ":status", "200", "content-type", "application/octet-stream",
				"inference-header-content-length", strconv.Itoa(len(header)))); err != nil {
				t.Fatal(err)
			}
			sendChunks(t, s, v2Resp, n, false)
			resp, err = s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			rsh := resp.GetResponseHeaders()
			if rsh == nil {
				t.Fatalf("reply %v, want response_headers", resp)
			}
			set = setHeaders(t, rsh.GetResponse().GetHeaderMutation())
			if set["content-type"] != "application/json" || set["x-request-id"] != "fd-1" {
				t.Errorf("response headers set %v", set)
			}
			if got := string(streamedBody(t, s, false)); got != wantTF {
				t.Errorf("TF body %q, want %q", got, wantTF)
			}
			_ = s.CloseSend()
			if err := h.processResult(t); err != nil {
				t.Errorf("Process = %v", err)
			}
		})
	}
}

// TestFullDuplexAnswers covers the full-duplex exchanges that end in an
// immediate response, and the pass-through echo.
func TestFullDuplexAnswers(t *testing.T) {
	// The body timeout is short only where a body never ends: the others
	// send theirs in seven 4-byte messages, which a busy machine can take
	// longer than 300 ms to deliver.
	h := startOpts(t, ServerOptions{}, Options{BodyTimeout: 30 * time.Second})
	short := startOpts(t, ServerOptions{}, Options{BodyTimeout: 300 * time.Millisecond})
	tests := []struct {
		name   string
		path   string
		body   string // sent in 4-byte chunks, the last with end_of_stream
		open   bool   // the body never ends
		status int32
		want   string
	}{
		{"syntax error", "/v1/models/half_plus_two:predict", `{"instances": [1.0,, 2.0]}`, false, 400, ""},
		{"unknown model", "/v1/models/nope:predict", `{"instances": [1]}`, false, 404,
			string(tfresponse.Error(nil, "Servable not found for request: Latest(nope)"))},
		{"body too slow", "/v1/models/half_plus_two:predict", `{"instances": [1`, true, 400,
			string(tfresponse.Error(nil, "Timed out reading the request body"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := h.stream(t)
			if tt.open {
				s = short.stream(t)
			}
			if err := s.Send(withConfig(requestHeaders(false, ":method", "POST", ":path", tt.path), fullDuplex)); err != nil {
				t.Fatal(err)
			}
			body := []byte(tt.body)
			for len(body) > 0 {
				k := min(4, len(body))
				if err := s.Send(chunkMsg(body[:k], k == len(body) && !tt.open, true)); err != nil {
					t.Fatal(err)
				}
				body = body[k:]
			}
			resp, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			ir := resp.GetImmediateResponse()
			if ir == nil || int32(ir.GetStatus().GetCode()) != tt.status || (tt.want != "" && string(ir.GetBody()) != tt.want) {
				t.Errorf("reply %v, want immediate %d %q", resp, tt.status, tt.want)
			}
		})
	}

	// A pass-through body is echoed chunk by chunk, both ways; an empty
	// last chunk (what Envoy sends when a body's end comes without data)
	// is answered too, or Envoy would wait for that reply for ever.
	for _, emptyEnd := range []bool{false, true} {
		t.Run("pass-through echoes, empty end "+strconv.FormatBool(emptyEnd), func(t *testing.T) {
			s := h.stream(t)
			resp := exchange(t, s, withConfig(requestHeaders(false, ":method", "POST", ":path", "/v2/models/m/infer"), fullDuplex))
			if resp.GetRequestHeaders() == nil || resp.GetModeOverride() != nil {
				t.Fatalf("reply %v, want request_headers without mode_override", resp)
			}
			for _, request := range []bool{true, false} {
				if !request {
					if resp := exchange(t, s, responseHeaders(false, ":status", "200")); resp.GetResponseHeaders() == nil {
						t.Fatalf("reply %v, want response_headers", resp)
					}
				}
				if emptyEnd {
					for _, c := range []string{"abc", "defgh"} {
						if err := s.Send(chunkMsg([]byte(c), false, request)); err != nil {
							t.Fatal(err)
						}
					}
					if err := s.Send(chunkMsg(nil, true, request)); err != nil {
						t.Fatal(err)
					}
				} else {
					sendChunks(t, s, []byte("abcdefgh"), 3, request)
				}
				if got := string(streamedBody(t, s, request)); got != "abcdefgh" {
					t.Errorf("request %v: echoed %q", request, got)
				}
			}
		})
	}
}

// TestBodyModeMismatch: an explicit --body-mode Envoy contradicts is
// answered 500 with the reason, on the stream's first message.
func TestBodyModeMismatch(t *testing.T) {
	buffered := &extprocv3.ProtocolConfiguration{
		RequestBodyMode:  procmodev3.ProcessingMode_BUFFERED,
		ResponseBodyMode: procmodev3.ProcessingMode_BUFFERED,
	}
	tests := []struct {
		mode BodyMode
		pc   *extprocv3.ProtocolConfiguration
		want string // "" = no mismatch
	}{
		{BodyModeBuffered, fullDuplex, "--body-mode=buffered"},
		{BodyModeFullDuplex, buffered, "--body-mode=full-duplex"},
		{BodyModeAuto, fullDuplex, ""},
		{BodyModeAuto, buffered, ""},
		{BodyModeBuffered, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			h := startOpts(t, ServerOptions{}, Options{BodyMode: tt.mode})
			s := h.stream(t)
			resp := exchange(t, s, withConfig(requestHeaders(true, ":method", "GET", ":path", "/v1/models/half_plus_two"), tt.pc))
			ir := resp.GetImmediateResponse()
			if tt.want == "" {
				if ir.GetStatus().GetCode() != 200 {
					t.Errorf("reply %v, want the status answer", resp)
				}
				return
			}
			if ir.GetStatus().GetCode() != 500 || !strings.Contains(string(ir.GetBody()), tt.want) {
				t.Errorf("reply %v, want 500 naming %s", resp, tt.want)
			}
		})
	}
}

func TestParseBodyMode(t *testing.T) {
	for _, s := range []string{"auto", "buffered", "full-duplex"} {
		m, err := ParseBodyMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseBodyMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseBodyMode("streamed"); err == nil {
		t.Error("ParseBodyMode(streamed) succeeded")
	}
}

// TestFullDuplexTrailers: a body whose end is its trailers message is
// translated then, its last streamed chunk without end_of_stream (the
// trailers reply ends the message, as Envoy requires).
func TestFullDuplexTrailers(t *testing.T) {
	h := start(t)
	s := h.stream(t)
	if err := s.Send(withConfig(requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict"), fullDuplex)); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*extprocv3.ProcessingRequest{
		chunkMsg([]byte(`{"instances": [1.0, `), false, true),
		chunkMsg([]byte(`2.0, 5.0]}`), false, true),
		{Request: &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: &extprocv3.HttpTrailers{}}},
	} {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	var kinds []string
	var body []byte
	for {
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		switch r := resp.GetResponse().(type) {
		case *extprocv3.ProcessingResponse_RequestHeaders:
			kinds = append(kinds, "headers")
		case *extprocv3.ProcessingResponse_RequestBody:
			sr := r.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse()
			if sr.GetEndOfStream() {
				t.Errorf("a body chunk ends the stream before the trailers")
			}
			body = append(body, sr.GetBody()...)
			kinds = append(kinds, "body")
		case *extprocv3.ProcessingResponse_RequestTrailers:
			kinds = append(kinds, "trailers")
		default:
			t.Fatalf("reply %v", resp)
		}
		if kinds[len(kinds)-1] == "trailers" {
			break
		}
	}
	if strings.Join(kinds, ",") != "headers,body,trailers" || !bytes.HasSuffix(body, f32le(1, 2, 5)) {
		t.Errorf("replies %v, body %q", kinds, body)
	}
}
