package httpproxy

import (
	"net/http"
	"net/textproto"
)

// The session names headers in lower case; net/http keys them in canonical
// form, and canonicalising a lower-case name allocates a new string every
// time. The names the session reads and writes on every exchange are
// mapped once here.
var canonicalNames = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"content-type", "content-length", "content-encoding", "accept-encoding",
		"inference-header-content-length", "x-request-id", "origin",
		"traceparent", "tracestate", "baggage", "connection", "x-tfsbridge-server",
	} {
		m[k] = textproto.CanonicalMIMEHeaderKey(k)
	}
	return m
}()

// canonicalName is textproto.CanonicalMIMEHeaderKey(name), without an
// allocation for the names in canonicalNames.
func canonicalName(name string) string {
	if c, ok := canonicalNames[name]; ok {
		return c
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

// headerGetter is an http.Header as the session reads it
// (session.HeaderGetter).
type headerGetter http.Header

// Get returns the first value of name, as http.Header.Get does.
func (h headerGetter) Get(name string) string {
	v := h[canonicalName(name)]
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// Values returns every value of name: the session asks for it to tell a
// header sent empty from one not sent.
func (h headerGetter) Values(name string) []string { return h[canonicalName(name)] }
