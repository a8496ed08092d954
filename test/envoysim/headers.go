package envoysim

import (
	"net/http"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// header is one entry of a headerMap. Keys are always lower case, as in Envoy's header maps.
type header struct {
	key, value string
}

// headerMap is an ordered multi-map of lower-cased header names, modelled on Envoy's
// HeaderMapImpl: pseudo-headers (":path", ":status", ...) are kept in front of the others,
// repeated names stay separate entries, and "set" replaces every existing entry.
type headerMap struct {
	entries []header
}

// get returns the first value of key.
func (m *headerMap) get(key string) (string, bool) {
	for _, e := range m.entries {
		if e.key == key {
			return e.value, true
		}
	}
	return "", false
}

// has reports whether key is present.
func (m *headerMap) has(key string) bool {
	_, ok := m.get(key)
	return ok
}

// add appends an entry; a pseudo-header goes after the last pseudo-header so that all of
// them stay in front, which is what Envoy guarantees (and HTTP/2 requires).
func (m *headerMap) add(key, value string) {
	if !strings.HasPrefix(key, ":") {
		m.entries = append(m.entries, header{key, value})
		return
	}
	i := 0
	for i < len(m.entries) && strings.HasPrefix(m.entries[i].key, ":") {
		i++
	}
	m.entries = append(m.entries, header{})
	copy(m.entries[i+1:], m.entries[i:])
	m.entries[i] = header{key, value}
}

// set replaces all entries of key by one (Envoy's setCopy: remove, then add).
func (m *headerMap) set(key, value string) {
	m.del(key)
	m.add(key, value)
}

// del removes every entry of key.
func (m *headerMap) del(key string) {
	out := m.entries[:0]
	for _, e := range m.entries {
		if e.key != key {
			out = append(out, e)
		}
	}
	m.entries = out
}

// byteSize is the sum of key and value lengths, the measure Envoy compares with
// max_request_headers_kb.
func (m *headerMap) byteSize() int {
	n := 0
	for _, e := range m.entries {
		n += len(e.key) + len(e.value)
	}
	return n
}

// proto converts the map to what Envoy sends the processor: every value in raw_value only
// (Envoy's default since the send_header_raw_value runtime flag flipped in 2023).
func (m *headerMap) proto() *corev3.HeaderMap {
	out := &corev3.HeaderMap{Headers: make([]*corev3.HeaderValue, 0, len(m.entries))}
	for _, e := range m.entries {
		out.Headers = append(out.Headers, &corev3.HeaderValue{Key: e.key, RawValue: []byte(e.value)})
	}
	return out
}

// hopByHop lists the connection-specific headers Envoy's connection manager strips before
// the filter chain sees a message, so the processor never sees them either.
var hopByHop = map[string]bool{
	"connection":        true,
	"keep-alive":        true,
	"proxy-connection":  true,
	"transfer-encoding": true,
	"upgrade":           true,
}

// appendHTTPHeader adds the entries of an net/http header in a deterministic order (Go's
// map loses the wire order Envoy would keep; sorting keeps test output stable).
func (m *headerMap) appendHTTPHeader(h http.Header) {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lk := strings.ToLower(k)
		if hopByHop[lk] {
			continue
		}
		for _, v := range h[k] {
			if lk == "te" && !strings.EqualFold(strings.TrimSpace(v), "trailers") {
				continue
			}
			m.add(lk, v)
		}
	}
}

// httpHeader returns the regular (non-pseudo) entries as an net/http header with
// canonical keys, so that net/http recognises Content-Length, User-Agent and friends.
func (m *headerMap) httpHeader() http.Header {
	h := make(http.Header, len(m.entries))
	for _, e := range m.entries {
		if strings.HasPrefix(e.key, ":") {
			continue
		}
		h.Add(e.key, e.value)
	}
	return h
}
