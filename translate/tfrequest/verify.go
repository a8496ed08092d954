package tfrequest

import (
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// verifyInputsSize is predict_util.cc's VerifyRequestInputsSize, which TF
// Serving's predictor runs on every parsed request before the model: the
// request must hold as many distinct inputs as the signature (docs/tfserving-rest.md §4.1).
// The JSON parser lets one request through with fewer: row instances that
// are b64 objects all feed the first input, even when the signature has
// several. Columnar objects ignore unknown names and require every
// signature input, so they always pass.
//
// The text names both sets as std::set<string> orders them (bytewise),
// joined by ",", then the differences both ways:
// "input size does not match signature: 1!=2 len({a}) != len({a,b}). Sent
// extra: {}. Missing but required: {b}."
func verifyInputsSize(sig *tensor.Signature, inputs []tensor.Tensor) error {
	if len(inputs) == len(sig.Inputs) {
		return nil // every parser path fills each input once, or fails
	}
	sent := tensor.NameSet(len(inputs), func(i int) string { return inputs[i].Name })
	want := tensor.NameSet(len(sig.Inputs), func(i int) string { return sig.Inputs[i].Name })
	if len(sent) == len(want) {
		return nil // TF compares map sizes: duplicate names count once
	}
	return apierr.InvalidArgumentf("input size does not match signature: %d!=%d len({%s}) != len({%s}). Sent extra: {%s}. Missing but required: {%s}.",
		len(sent), len(want), strings.Join(sent, ","), strings.Join(want, ","),
		strings.Join(tensor.SetDifference(sent, want), ","), strings.Join(tensor.SetDifference(want, sent), ","))
}
