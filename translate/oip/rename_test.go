package oip

import (
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// TestDecodeRenamed: with a model map's renames (Signature.Wire) the
// decoder matches outputs by their v2 names and names them, and its
// errors, with the TF names.
func TestDecodeRenamed(t *testing.T) {
	sig := &tensor.Signature{
		Outputs: []tensor.Spec{{Name: "scores", DataType: tensor.FP32, Shape: []int64{-1}}},
		Wire:    &tensor.Signature{Outputs: []tensor.Spec{{Name: "output_0", DataType: tensor.FP32, Shape: []int64{-1}}}},
	}
	for _, tc := range []struct {
		body, name, err string
	}{
		{body: `{"outputs":[{"name":"output_0","datatype":"FP32","shape":[2],"data":[1,2]},{"name":"extra","datatype":"INT32","shape":[1],"data":[3]}]}`, name: "scores"},
		{body: `{"outputs":[{"name":"output_0","datatype":"FP32","shape":[3],"data":[1,2]}]}`, err: "'scores'"},
		{body: `{"outputs":[{"name":"output_0","datatype":"FP32","shape":[1],"data":[1]},{"name":"output_0","datatype":"FP32","shape":[1],"data":[1]}]}`, err: "output 'scores' appears twice"},
	} {
		out, err := DecodeResponse([]byte(tc.body), -1, sig, tensor.DefaultLimits)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "output_0") {
				t.Errorf("%s: err %v, want one naming %s and not output_0", tc.body, err, tc.err)
			}
			continue
		}
		if err != nil || out[0].Name != tc.name || out[1].Name != "extra" {
			t.Errorf("%s: %v %+v", tc.body, err, out)
		}
	}
}
