package translate

import (
	"errors"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Tensor renames of the model map (tensor.Signature.Wire): the TF side
// of tfsbridge only ever sees TF names, so the names are swapped at the
// edge, right before the v2 request is encoded and right after the v2
// response is decoded.

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

// outputsFromWire gives each decoded output its TF name; outputs the
// signature does not declare keep the server's name.
func outputsFromWire(sig *tensor.Signature, outputs []tensor.Tensor) {
	if sig == nil || sig.Wire == nil {
		return
	}
	for i := range outputs {
		if j := specIndex(sig.Wire.Outputs, outputs[i].Name); j >= 0 && j < len(sig.Outputs) {
			outputs[i].Name = sig.Outputs[j].Name
		}
	}
}

// errorFromWire rewrites the v2 output names that tfsbridge's own decode
// errors quote ('name') into their TF names, so a client never reads a
// name it did not use.
func errorFromWire(sig *tensor.Signature, err error) error {
	var e *apierr.Error
	if sig == nil || sig.Wire == nil || !errors.As(err, &e) {
		return err
	}
	msg := e.Msg
	for j := range sig.Wire.Outputs {
		if j < len(sig.Outputs) && sig.Wire.Outputs[j].Name != sig.Outputs[j].Name {
			msg = strings.ReplaceAll(msg, "'"+sig.Wire.Outputs[j].Name+"'", "'"+sig.Outputs[j].Name+"'")
		}
	}
	if msg == e.Msg {
		return err
	}
	return apierr.Wrap(e.Code, err, msg)
}

func specIndex(specs []tensor.Spec, name string) int {
	for i := range specs {
		if specs[i].Name == name {
			return i
		}
	}
	return -1
}
