package tfrequest

import (
	"slices"
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
	sent := sortedSet(len(inputs), func(i int) string { return inputs[i].Name })
	want := sortedSet(len(sig.Inputs), func(i int) string { return sig.Inputs[i].Name })
	if len(sent) == len(want) {
		return nil // TF compares map sizes: duplicate names count once
	}
	return apierr.InvalidArgumentf("input size does not match signature: %d!=%d len({%s}) != len({%s}). Sent extra: {%s}. Missing but required: {%s}.",
		len(sent), len(want), strings.Join(sent, ","), strings.Join(want, ","),
		strings.Join(setDifference(sent, want), ","), strings.Join(setDifference(want, sent), ","))
}

// sortedSet returns the n names name(0..n-1) sorted and without
// duplicates, as a std::set<string> holds them.
func sortedSet(n int, name func(int) string) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = name(i)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// setDifference returns the names of sorted set a that are not in sorted
// set b, in order.
func setDifference(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, found := slices.BinarySearch(b, s); !found {
			out = append(out, s)
		}
	}
	return out
}
