package http1

import (
	"net"
	"net/http"
	"net/url"
	"slices"
)

// AppendHeader appends the header line "k: v\r\n" to b, or nothing when
// v is empty or holds a control character (it could cut the head).
func AppendHeader(b []byte, k, v string) []byte {
	if v == "" || !validValue(v) {
		return b
	}
	return appendField(b, k, v)
}

func appendField(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	b = append(b, v...)
	return append(b, "\r\n"...)
}

// AppendHTTPHeader appends h's lines to b: its fields in key order, as
// Request.Write writes them, but for the ones the Client
// writes itself (Host, Content-Length, Connection) and the ones it does
// not send (Transfer-Encoding, Trailer); an empty User-Agent is left
// out, as Request.Write does. A field whose name is not a token or whose
// value holds a control character is left out (net/http's Transport
// refuses the request; ReverseProxy has already checked its client's).
func AppendHTTPHeader(b []byte, h http.Header) []byte {
	var arr [32]string
	keys := arr[:0]
	for k := range h {
		switch k {
		case "Host", "Content-Length", "Connection", "Transfer-Encoding", "Trailer":
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !validName(k) {
			continue
		}
		for _, v := range h[k] {
			if (v == "" && k == "User-Agent") || !validValue(v) {
				continue
			}
			b = appendField(b, k, v)
		}
	}
	return b
}

// Addr is the address to dial for a plain-http URL: its host and port,
// port 80 when it names none.
func Addr(u *url.URL) string {
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "80")
	}
	return u.Host
}
