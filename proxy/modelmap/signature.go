package modelmap

import (
	"slices"

	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// TFSignature returns the signature a TF client sees for s: wire (what
// the v2 server published, or nil when s has explicit metadata) with the
// explicit metadata in place of its tensors, the tensors renamed to their
// TF names, and Model set to tfModel. When any tensor is renamed, the
// result's Wire holds the same tensors in v2 names, for the v2 encoder
// and decoder. wire itself is shared with the metadata cache and is never
// modified.
func (s *Signature) TFSignature(wire *tensor.Signature, tfModel string) *tensor.Signature {
	if wire == nil {
		wire = &tensor.Signature{}
	}
	v2sig := *wire
	if s != nil && s.Metadata != nil {
		v2sig.Inputs = s.Metadata.Inputs
		v2sig.Outputs = s.Metadata.Outputs
		if wire.MaxBatchSize == 0 {
			v2sig.Batched = oip.LeadingBatchDim(v2sig.Inputs)
		}
	}
	if v2sig.Model == "" && s != nil {
		v2sig.Model = s.Model
	}
	tf := v2sig
	tf.Model = tfModel
	tf.Wire = nil
	var renamed bool
	if s != nil {
		tf.Inputs, renamed = toTF(v2sig.Inputs, s.Inputs)
		var r2 bool
		tf.Outputs, r2 = toTF(v2sig.Outputs, s.Outputs)
		renamed = renamed || r2
	}
	if renamed {
		w := v2sig
		tf.Wire = &w
	}
	return &tf
}

// toTF returns specs with every v2 name that renames maps to (TF → v2)
// replaced by its TF name; the slice is copied only when a name changes.
func toTF(specs []tensor.Spec, renames map[string]string) ([]tensor.Spec, bool) {
	if len(renames) == 0 {
		return specs, false
	}
	var out []tensor.Spec
	for tfName, v2Name := range renames {
		i := slices.IndexFunc(specs, func(sp tensor.Spec) bool { return sp.Name == v2Name })
		if i < 0 || tfName == v2Name {
			continue
		}
		if out == nil {
			out = slices.Clone(specs)
		}
		out[i].Name = tfName
	}
	if out == nil {
		return specs, false
	}
	return out, true
}
