package observe

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// NewLogger returns a slog logger writing to w at level ("debug", "info",
// "warn", "error") in format ("text" or "json").
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

// maxRequestIDLen bounds a client-supplied request id before it is copied
// into every log line and the v2 request's "id".
const maxRequestIDLen = 128

// RequestID returns the id to log an exchange under: the client's (or
// Envoy's) x-request-id when present and sane, else a fresh random UUID.
func RequestID(header string) string {
	if header != "" && len(header) <= maxRequestIDLen && printable(header) {
		return header
	}
	return NewRequestID()
}

// NewRequestID returns a random version-4 UUID, the same shape Envoy uses
// for x-request-id.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// printable reports whether s is visible ASCII only, so that an id cannot
// smuggle control characters into logs or the v2 JSON.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\' {
			return false
		}
	}
	return true
}
