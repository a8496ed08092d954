package tfexample

import (
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

type vectorInput struct {
	Method string `json:"method"`
	JSON   string `json:"json"`
}

type vectorExpected struct {
	Error *struct {
		HTTPStatus       int    `json:"http_status"`
		Code             string `json:"code"`
		MessageSubstring string `json:"message_substring"`
		Message          string `json:"message"`
	} `json:"error"`
}

// TestConformance replays every classify/regress request vector: the
// exact error (or the substring TF's own test asserts) and its status.
func TestConformance(t *testing.T) {
	ran := 0
	for _, c := range conformance.MustLoad(t, "tfserving_cases.json") {
		var in vectorInput
		if c.Direction != "request" {
			continue
		}
		conformance.Decode(t, c.Input, &in)
		if !strings.Contains(in.Method, "classify") && !strings.Contains(in.Method, "regress") {
			continue
		}
		t.Run(c.ID, func(t *testing.T) {
			var exp vectorExpected
			conformance.Decode(t, c.Expected, &exp)
			if exp.Error == nil {
				t.Fatalf("unrecognised expectation %s", c.Expected)
			}
			r, err := Parse([]byte(in.JSON), Options{})
			if err == nil {
				t.Fatalf("no error; %d examples", len(r.Examples))
			}
			e := apierr.As(err)
			if exp.Error.Message != "" && e.Msg != exp.Error.Message {
				t.Errorf("message\n got %q\nwant %q", e.Msg, exp.Error.Message)
			}
			if !strings.Contains(e.Msg, exp.Error.MessageSubstring) {
				t.Errorf("message %q lacks %q", e.Msg, exp.Error.MessageSubstring)
			}
			if e.HTTPStatus() != exp.Error.HTTPStatus || e.Code.String() != exp.Error.Code {
				t.Errorf("status %d %s, want %d %s", e.HTTPStatus(), e.Code, exp.Error.HTTPStatus, exp.Error.Code)
			}
		})
		ran++
	}
	if ran == 0 {
		t.Fatal("no classify/regress vector ran")
	}
}
