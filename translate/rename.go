package translate

import (
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Tensor renames of the model map (tensor.Signature.Wire): the TF side
// of tfsbridge only ever sees TF names, so the names are swapped at the
// edge: here, right before the v2 request is encoded, and in the v2
// decoder, which names each output it decodes after its TF spec.

// inputsToWire gives each input tensor its v2 name.
func inputsToWire(sig *tensor.Signature, inputs []tensor.Tensor) {
	if sig == nil || sig.Wire == nil {
		return
	}
	for i := range inputs {
		if j := specIndex(sig.Inputs, inputs[i].Name); j >= 0 && j < len(sig.Wire.Inputs) {
			inputs[i].Name = sig.Wire.Inputs[j].Name
		}
	}
}

func specIndex(specs []tensor.Spec, name string) int {
	for i := range specs {
		if specs[i].Name == name {
			return i
		}
	}
	return -1
}
