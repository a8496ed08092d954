package tfrequest

import (
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// TestSecondLook: every class of body a stream cannot decide (ErrUndecided)
// is decided by Parse, which holds the text, exactly as the tape oracle
// decides it; the stream answers each with the oracle's answer or the 400.
func TestSecondLook(t *testing.T) {
	named := sigOf("b64:BYTES", "a:FP32")
	lone := sigOf("b64:BYTES")
	pair := sigOf("a:FP32", "b:FP32")
	x, y := sigOf("x:FP32"), sigOf("y:INT32")
	byName := func(name string) (*tensor.Signature, error) {
		switch name {
		case "":
			return x, nil
		case "other":
			return y, nil
		}
		return nil, apierr.Errorf(apierr.NotFound, "Serving signature name: %q not found in signature def", name)
	}
	small := tensor.Limits{MaxElements: 4}
	for _, tc := range []struct {
		body    string
		resolve Resolver
		lim     tensor.Limits
	}{
		// An input named "b64": a b64 value or that input, told by the
		// whole object.
		{`{"inputs": {"b64": "aGk="}}`, fixed(named), tensor.Limits{}},
		{`{"inputs": {"b64": "aGk=" }}`, fixed(lone), tensor.Limits{}},
		{`{"inputs": {"b64": ["x"], "a": [1]}}`, fixed(named), tensor.Limits{}},
		{`{"inputs": {"b64": "aGk=", "a": [1]}}`, fixed(named), tensor.Limits{}},
		{`{"inputs": {"b64": "a\"Gk=", "a": 1}}`, fixed(named), tensor.Limits{}},
		{`{"inputs": {"b64": "aGk="`, fixed(named), tensor.Limits{}},
		{`{"instances": [{"b64": "aGk="}]}`, fixed(named), tensor.Limits{}},
		{`{"instances": [{"b64": "aGk="}, {"b64": "eW8="}]}`, fixed(lone), tensor.Limits{}},
		{`{"instances": [{"b64": "x", "a": 1}]}`, fixed(named), tensor.Limits{}},
		{`{"instances": [{"b64": "x", "a": 1}, {"b64": "aGk="}]}`, fixed(named), tensor.Limits{}},
		{`{"instances": [{"b64": "x", "a": 1}, {"b64": "y", "a": 2}]}`, fixed(named), tensor.Limits{}},
		{`{"instances": [{"b64": "x", "a": 1}, {"b64": "y" , "a": [2]}]}`, fixed(named), tensor.Limits{}},
		// "signature_name" after the values, naming other inputs.
		{`{"instances": [1, 2], "signature_name": "other"}`, byName, tensor.Limits{}},
		{`{"instances": [1.5], "signature_name": "other"}`, byName, tensor.Limits{}},
		{`{"inputs": {"y": [1]}, "signature_name": "other", "signature_name": "nope"}`, byName, tensor.Limits{}},
		// Named inputs over the element limit together: TF counts them
		// in signature order.
		{`{"inputs": {"b": [1, 2, 3], "a": [1, 2]}}`, fixed(pair), small},
		{`{"inputs": {"b": [1, 2, 3], "a": [1, "x"]}}`, fixed(pair), small},
		{`{"inputs": {"b": [1, "x", 3, 4, 5], "a": [1, 2, 3]}}`, fixed(pair), small},
		{`{"inputs": {"b": [[1, 2], [3]], "a": [1, 2, 3, 4]}}`, fixed(pair), small},
		{`{"inputs": {"b": [1, 2, 3, 4, 5], "z": 0}}`, fixed(pair), small},
		{`{"signature_name": "", "inputs": {"b": [1, 2, 3, 4, 5], "a": [1]}, "q": [1]}`, fixed(pair), small},
	} {
		body := []byte(tc.body)
		exact, exErr := tapeParse(body, tc.resolve, tc.lim)
		got, err := Parse(body, tc.resolve, tc.lim)
		if sameAnswer(t, body, exact, exErr, got, err, "whole body") {
			t.Errorf("%s: Parse undecided: %v", tc.body, err)
		}
		checkStream(t, body, tc.resolve, tc.lim)
		if exErr == nil {
			exact.Release()
		}
	}
}
