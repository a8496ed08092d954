package translate

import (
	"errors"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

func renamedSig() *tensor.Signature {
	wire := &tensor.Signature{
		Inputs:  []tensor.Spec{{Name: "input_1"}, {Name: "same"}},
		Outputs: []tensor.Spec{{Name: "output_0"}, {Name: "other"}},
	}
	return &tensor.Signature{
		Inputs:  []tensor.Spec{{Name: "images"}, {Name: "same"}},
		Outputs: []tensor.Spec{{Name: "scores"}, {Name: "other"}},
		Wire:    wire,
	}
}

func TestRenames(t *testing.T) {
	sig := renamedSig()
	in := []tensor.Tensor{{Name: "images"}, {Name: "same"}}
	inputsToWire(sig, in)
	if in[0].Name != "input_1" || in[1].Name != "same" {
		t.Errorf("inputs on the wire: %q %q", in[0].Name, in[1].Name)
	}
	out := []tensor.Tensor{{Name: "output_0"}, {Name: "other"}, {Name: "undeclared"}}
	outputsFromWire(sig, out)
	if out[0].Name != "scores" || out[1].Name != "other" || out[2].Name != "undeclared" {
		t.Errorf("outputs for TF: %q %q %q", out[0].Name, out[1].Name, out[2].Name)
	}
	// No Wire: nothing changes.
	plain := []tensor.Tensor{{Name: "output_0"}}
	outputsFromWire(&tensor.Signature{}, plain)
	inputsToWire(nil, plain)
	if plain[0].Name != "output_0" {
		t.Error("renamed without a Wire signature")
	}
}

func TestErrorFromWire(t *testing.T) {
	sig := renamedSig()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{apierr.New(apierr.BadGateway, "output 'output_0' has no shape"), "output 'scores' has no shape"},
		{apierr.New(apierr.BadGateway, "output 'output_01' has no shape"), "output 'output_01' has no shape"},
		{apierr.New(apierr.BadGateway, "output 'other' appears twice"), "output 'other' appears twice"},
		{errors.New("plain 'output_0'"), "plain 'output_0'"},
	} {
		got := errorFromWire(sig, tc.err)
		if got.Error() != tc.want && apierr.As(got).Msg != tc.want {
			t.Errorf("%v → %v, want %q", tc.err, got, tc.want)
		}
		if e := apierr.As(got); e.Code != apierr.As(tc.err).Code {
			t.Errorf("code changed: %v", e.Code)
		}
	}
}
