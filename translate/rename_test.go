package translate

import (
	"testing"

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
	// No Wire: nothing changes.
	plain := []tensor.Tensor{{Name: "images"}}
	inputsToWire(&tensor.Signature{}, plain)
	inputsToWire(nil, plain)
	if plain[0].Name != "images" {
		t.Error("renamed without a Wire signature")
	}
}
