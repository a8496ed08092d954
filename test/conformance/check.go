package conformance

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// ExpectedError is a vector's "expected.error": the status and code TF
// Serving answers, the exact message when the vector derives it, and the
// substring TF's own test asserts.
type ExpectedError struct {
	HTTPStatus       int    `json:"http_status"`
	Code             string `json:"code"`
	MessageSubstring string `json:"message_substring"`
	Message          string `json:"message"`
}

// CheckError checks that err is the error e expects: its message (exact
// when e has one) and substring, its HTTP status and its code name.
func CheckError(t testing.TB, err error, e *ExpectedError) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %d %q", e.HTTPStatus, e.Message+e.MessageSubstring)
	}
	got := apierr.As(err)
	if e.Message != "" && got.Msg != e.Message {
		t.Errorf("message\n got %q\nwant %q", got.Msg, e.Message)
	}
	if !strings.Contains(got.Msg, e.MessageSubstring) {
		t.Errorf("message %q lacks %q", got.Msg, e.MessageSubstring)
	}
	if got.HTTPStatus() != e.HTTPStatus || got.Code.String() != e.Code {
		t.Errorf("status %d %s, want %d %s", got.HTTPStatus(), got.Code, e.HTTPStatus, e.Code)
	}
}

// RequestBodies returns the TF Serving request body of every request
// vector of file that has one: fuzz seeds.
func RequestBodies(t testing.TB, file string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, c := range MustLoad(t, file) {
		var in struct {
			JSON string `json:"json"`
		}
		if c.Direction == "request" && json.Unmarshal(c.Input, &in) == nil && in.JSON != "" {
			out = append(out, []byte(in.JSON))
		}
	}
	return out
}
