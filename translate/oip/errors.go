package oip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// The messages a TF client gets when the v2 server cannot be reached or
// does not answer in time. They are the same whichever layer noticed — the
// reverse proxy's own round trip, or Envoy's router, whose local reply the
// ext_proc session recognises — so the two transports answer alike.
const (
	MsgUnavailable = "The v2 inference server is unavailable"
	MsgTimeout     = "Timed out waiting for the v2 inference server"
)

// maxErrorLen bounds the message DecodeError returns: a v2 error becomes a
// TF client's {"error": ...}, and an HTML page or a stack trace must not be
// relayed whole.
const maxErrorLen = 4096

// maxErrorJSON bounds the body DecodeError tries to parse as JSON; larger
// bodies are clipped as text without being parsed.
const maxErrorJSON = 1 << 20

// DecodeError turns the body of a non-2xx v2 response into the message a
// TF client gets (docs/open-inference-protocol.md §7): the "error" string all three servers send, the
// "detail" of FastAPI (KServe, MLServer: a string, or a validation list
// rendered "loc: msg; ..."), the text of a plain-text or HTML body, or the
// HTTP status text for an empty body. The result is valid UTF-8 and at
// most about 4 KiB.
func DecodeError(status int, contentType string, body []byte) string {
	b := bytes.TrimSpace(body)
	var msg string
	switch {
	case len(b) == 0:
	case b[0] == '{' && len(b) <= maxErrorJSON:
		if m, ok := jsonErrorMessage(b); ok {
			msg = m
		} else {
			msg = string(clipBytes(b, maxErrorLen+1))
		}
	case b[0] == '<' || strings.Contains(strings.ToLower(contentType), "html"):
		msg = htmlText(clipBytes(b, 64*maxErrorLen))
	default:
		msg = string(clipBytes(b, maxErrorLen+1))
	}
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = statusText(status)
	}
	return clip(strings.ToValidUTF8(msg, "\uFFFD"), maxErrorLen)
}

// jsonErrorMessage extracts the message of a JSON error object, or reports
// false when b is not one.
func jsonErrorMessage(b []byte) (string, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return "", false
	}
	null := false
	for _, key := range [...]string{"error", "detail", "message"} {
		raw, ok := obj[key]
		if !ok {
			continue
		}
		if string(raw) == "null" {
			null = true
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, true
		}
		if key == "detail" {
			if m, ok := fastAPIDetail(raw); ok {
				return m, true
			}
		}
		return string(raw), true
	}
	// {"error": null} says nothing; the status text says more.
	return "", null
}

// fastAPIDetail renders FastAPI's validation list, e.g.
// [{"loc":["body","inputs",0,"datatype"],"msg":"Input should be ..."}],
// as "body.inputs.0.datatype: Input should be ...", joined by "; ".
func fastAPIDetail(raw json.RawMessage) (string, bool) {
	var items []struct {
		Loc []json.RawMessage `json:"loc"`
		Msg string            `json:"msg"`
	}
	if json.Unmarshal(raw, &items) != nil || len(items) == 0 {
		return "", false
	}
	var sb strings.Builder
	for i, it := range items {
		if sb.Len() > maxErrorLen {
			break
		}
		if i > 0 {
			sb.WriteString("; ")
		}
		for j, l := range it.Loc {
			if j > 0 {
				sb.WriteByte('.')
			}
			var s string
			if json.Unmarshal(l, &s) == nil {
				sb.WriteString(s)
			} else {
				sb.Write(l)
			}
		}
		if len(it.Loc) > 0 {
			sb.WriteString(": ")
		}
		sb.WriteString(it.Msg)
	}
	return sb.String(), true
}

// htmlText returns the visible text of an HTML error page: tags dropped,
// runs of white space collapsed. It is not an HTML parser; error pages of
// proxies and frameworks are simple enough for this.
func htmlText(b []byte) string {
	var sb strings.Builder
	inTag, space := false, false
	for _, c := range b {
		switch {
		case c == '<':
			inTag = true
		case c == '>' && inTag:
			inTag = false
			space = true
		case inTag:
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			space = true
		default:
			if space && sb.Len() > 0 {
				sb.WriteByte(' ')
			}
			space = false
			sb.WriteByte(c)
		}
		if sb.Len() > maxErrorLen {
			break
		}
	}
	return sb.String()
}

func statusText(status int) string {
	if t := http.StatusText(status); t != "" {
		return t
	}
	return "HTTP status " + strconv.Itoa(status)
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

func clipBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// errBadResponse marks every DecodeResponse error for errors.Is.
var errBadResponse = errors.New("invalid v2 response")

// badResponse is the error for a response that cannot be translated: a
// 502, since the fault is the inference server's, not the client's.
func badResponse(cause error, format string, args ...any) *apierr.Error {
	if cause == nil {
		cause = errBadResponse
	}
	return apierr.Wrap(apierr.BadGateway, cause, "invalid response from inference server: "+fmt.Sprintf(format, args...))
}
