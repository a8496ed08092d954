package extproc

import (
	"strings"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// headerMap is a request's or response's headers as Envoy sent them:
// lower-case keys, values from raw_value (Envoy's default since late 2023)
// falling back to value (older Envoys, other data planes). It implements
// session.HeaderGetter.
type headerMap []*corev3.HeaderValue

// Get returns the first value of name ("" when absent). Envoy sends keys
// lower-cased; other data planes might not, so the match ignores case.
func (m headerMap) Get(name string) string {
	for _, h := range m {
		if h == nil || !strings.EqualFold(h.GetKey(), name) {
			continue
		}
		if raw := h.GetRawValue(); len(raw) > 0 {
			// The message is never written to once received: its bytes
			// can be the string's (a copy per header read showed in
			// every exchange's allocations).
			return unsafe.String(&raw[0], len(raw))
		}
		return h.GetValue()
	}
	return ""
}

// headersOf returns the header list of a headers message (nil-safe).
func headersOf(h *extprocv3.HttpHeaders) headerMap { return h.GetHeaders().GetHeaders() }

// Has reports whether name is present at all, even with an empty value.
func (m headerMap) Has(name string) bool {
	for _, h := range m {
		if h != nil && strings.EqualFold(h.GetKey(), name) {
			return true
		}
	}
	return false
}
