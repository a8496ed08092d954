package tfexample

import (
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/test/conformance"
)

type vectorInput struct {
	Method string `json:"method"`
	JSON   string `json:"json"`
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
			var exp struct {
				Error *conformance.ExpectedError `json:"error"`
			}
			conformance.Decode(t, c.Expected, &exp)
			if exp.Error == nil {
				t.Fatalf("unrecognised expectation %s", c.Expected)
			}
			_, err := Parse([]byte(in.JSON), Options{})
			conformance.CheckError(t, err, exp.Error)
		})
		ran++
	}
	if ran == 0 {
		t.Fatal("no classify/regress vector ran")
	}
}
