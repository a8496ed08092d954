package extproc

import "testing"

// Envoy's x-request-id comes back to the client on an immediate response.
func TestRequestIDEchoed(t *testing.T) {
	h := start(t)
	s := h.stream(t)
	resp := exchange(t, s, requestHeaders(true, ":method", "GET", ":path", "/v1/models/half_plus_two", "x-request-id", "envoy-id-1"))
	ir := resp.GetImmediateResponse()
	if got := setHeaders(t, ir.GetHeaders())["x-request-id"]; got != "envoy-id-1" {
		t.Errorf("immediate response x-request-id = %q, want Envoy's envoy-id-1", got)
	}
}
