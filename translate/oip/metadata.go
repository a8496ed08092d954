package oip

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// metaTensor is one entry of "inputs"/"outputs" in v2 model metadata.
// Metadata never carries NaN or huge integers, so encoding/json is enough
// here (it is read once per model and cached, far from the hot path).
type metaTensor struct {
	Name     *string  `json:"name"`
	Datatype *string  `json:"datatype"`
	Shape    *[]int64 `json:"shape"`
	// Parameters (MLServer's content_type) are tolerated and ignored.
}

type modelMetadata struct {
	Name     string       `json:"name"`
	Versions []string     `json:"versions"` // null on KServe
	Platform string       `json:"platform"`
	Inputs   []metaTensor `json:"inputs"`
	Outputs  []metaTensor `json:"outputs"`
}

// ParseModelMetadata turns the body of GET /v2/models/{m}[/versions/{v}]
// into a signature (docs/open-inference-protocol.md §9). KServe's empty input/output lists and null
// versions are accepted. Batched is set when every input has a leading -1;
// on Triton ApplyTritonConfig then settles it, because -1 also marks
// variable non-batch dimensions.
func ParseModelMetadata(body []byte) (*tensor.Signature, error) {
	var m modelMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, badMetadata(err, "%s", err.Error())
	}
	if len(m.Versions) > maxVersions {
		return nil, badMetadata(nil, "%d versions, more than the limit of %d", len(m.Versions), maxVersions)
	}
	sig := &tensor.Signature{Model: m.Name, Versions: m.Versions, Platform: m.Platform}
	var err error
	if sig.Inputs, err = metaSpecs("input", m.Inputs); err != nil {
		return nil, err
	}
	if sig.Outputs, err = metaSpecs("output", m.Outputs); err != nil {
		return nil, err
	}
	dims := 0
	for _, specs := range [][]tensor.Spec{sig.Inputs, sig.Outputs} {
		for _, sp := range specs {
			dims += len(sp.Shape)
		}
	}
	if dims > maxSignatureDims {
		return nil, badMetadata(nil, "%d dimensions in all, more than the limit of %d", dims, maxSignatureDims)
	}
	sig.Batched = LeadingBatchDim(sig.Inputs)
	return sig, nil
}

// maxSignatureTensors bounds the inputs, and the outputs, a model's
// metadata may declare. Every predict request allocates state per signature
// input before it looks at its body (TF Serving's checks need the whole
// input map), about 110 bytes each: metadata declaring 100 000 inputs made
// each 20-byte request allocate 11 MB. Real models declare a handful, a
// few hundred for wide feature models.
const maxSignatureTensors = 4096

// maxSignatureDims bounds the dimensions of all inputs and outputs
// together, and maxVersions the versions a model may list. TF's metadata
// answer prints about 100 bytes per dimension and its status answer about
// 150 per version: 15 MiB of metadata listing five million dimensions
// became a 464 MB metadata answer and a 1.8 GiB peak. Real models have a
// few dimensions per tensor (TF's own limit is a rank of 254) and a few
// versions.
const (
	maxSignatureDims = 1 << 16
	maxVersions      = 4096
)

func metaSpecs(what string, ts []metaTensor) ([]tensor.Spec, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	if len(ts) > maxSignatureTensors {
		return nil, badMetadata(nil, "%d %ss, more than the limit of %d", len(ts), what, maxSignatureTensors)
	}
	specs := make([]tensor.Spec, len(ts))
	seen := make(map[string]struct{}, len(ts))
	for i, t := range ts {
		if t.Name == nil || *t.Name == "" {
			return nil, badMetadata(nil, "%s %d has no name", what, i)
		}
		name := *t.Name
		if _, dup := seen[name]; dup {
			return nil, badMetadata(nil, "duplicate %s %q", what, clip(name, 64))
		}
		seen[name] = struct{}{}
		if t.Datatype == nil {
			return nil, badMetadata(nil, "%s %q has no datatype", what, clip(name, 64))
		}
		dt, ok := tensor.ParseV2(*t.Datatype)
		if !ok {
			// KServe upper-cases datatypes it receives, so a custom model
			// may publish lower case; anything else is unknown.
			dt, ok = tensor.ParseV2(strings.ToUpper(*t.Datatype))
		}
		if !ok {
			return nil, badMetadata(nil, "%s %q has unknown datatype %q", what, clip(name, 64), clip(*t.Datatype, 32))
		}
		if t.Shape == nil {
			return nil, badMetadata(nil, "%s %q has no shape", what, clip(name, 64))
		}
		for _, d := range *t.Shape {
			if d < -1 {
				return nil, badMetadata(nil, "%s %q has invalid dimension %d", what, clip(name, 64), d)
			}
		}
		specs[i] = tensor.Spec{Name: name, DataType: dt, Shape: *t.Shape}
	}
	return specs, nil
}

// LeadingBatchDim reports whether every input's first dimension is -1,
// which is how v2 metadata without a Triton config marks a batching model.
func LeadingBatchDim(inputs []tensor.Spec) bool {
	if len(inputs) == 0 {
		return false
	}
	for _, in := range inputs {
		if len(in.Shape) == 0 || in.Shape[0] != -1 {
			return false
		}
	}
	return true
}

// ApplyTritonConfig refines sig with Triton's model configuration (the body
// of GET /v2/models/{m}/config): max_batch_size > 0 means the leading -1 of
// the metadata shapes is the batch dimension, 0 (or absent, as protobuf
// JSON omits zero values) means the model does not batch.
func ApplyTritonConfig(sig *tensor.Signature, config []byte) error {
	if sig == nil {
		return fmt.Errorf("v2: ApplyTritonConfig on a nil signature")
	}
	var c struct {
		// protobuf JSON prints int32 as a number but accepts (and some
		// printers emit) a quoted integer; json.Number takes both.
		MaxBatchSize json.Number `json:"max_batch_size"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return badConfig(err, "%s", err.Error())
	}
	n := int64(0)
	if c.MaxBatchSize != "" {
		v, err := strconv.ParseInt(string(c.MaxBatchSize), 10, 32)
		if err != nil || v < 0 {
			return badConfig(err, "invalid max_batch_size %q", clip(string(c.MaxBatchSize), 32))
		}
		n = v
	}
	sig.MaxBatchSize = n
	sig.Batched = n > 0
	return nil
}

func badMetadata(cause error, format string, args ...any) *apierr.Error {
	return apierr.Wrap(apierr.BadGateway, cause, "invalid model metadata from inference server: "+fmt.Sprintf(format, args...))
}

func badConfig(cause error, format string, args ...any) *apierr.Error {
	return apierr.Wrap(apierr.BadGateway, cause, "invalid model config from inference server: "+fmt.Sprintf(format, args...))
}
