package tfclient

import (
	"math"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// The TF Serving gRPC methods (tensorflow_serving/apis/*_service.proto).
const (
	MethodPredict          = "/tensorflow.serving.PredictionService/Predict"
	MethodClassify         = "/tensorflow.serving.PredictionService/Classify"
	MethodRegress          = "/tensorflow.serving.PredictionService/Regress"
	MethodMultiInference   = "/tensorflow.serving.PredictionService/MultiInference"
	MethodGetModelMetadata = "/tensorflow.serving.PredictionService/GetModelMetadata"
	MethodGetModelStatus   = "/tensorflow.serving.ModelService/GetModelStatus"
	MethodReloadConfig     = "/tensorflow.serving.ModelService/HandleReloadConfigRequest"
)

// ModelSpec is tensorflow.serving.ModelSpec.
type ModelSpec struct {
	Name string
	// Version is version.value; nil sends no version (the latest).
	Version *int64
	// Label is version_label (set Version or Label, not both).
	Label         string
	SignatureName string
}

// Spec is a ModelSpec naming only the model.
func Spec(name string) ModelSpec { return ModelSpec{Name: name} }

// WithVersion returns s asking for version v.
func (s ModelSpec) WithVersion(v int64) ModelSpec { s.Version = &v; return s }

// Marshal serializes s in field-number order: name=1, version=2 (Int64Value), signature_name=3,
// version_label=4.
func (s ModelSpec) Marshal() []byte {
	var b []byte
	if s.Name != "" {
		b = appendString(b, 1, s.Name)
	}
	if s.Version != nil {
		var v []byte
		if *s.Version != 0 {
			v = protowire.AppendTag(v, 1, protowire.VarintType)
			v = protowire.AppendVarint(v, uint64(*s.Version))
		}
		b = appendBytes(b, 2, v)
	}
	if s.SignatureName != "" {
		b = appendString(b, 3, s.SignatureName)
	}
	if s.Label != "" {
		b = appendString(b, 4, s.Label)
	}
	return b
}

// PredictRequest serializes a PredictRequest: model_spec=1, inputs=2 (map entries sorted by
// name, key=1, value=2), output_filter=3.
func PredictRequest(spec ModelSpec, inputs map[string]TensorProto, outputFilter ...string) []byte {
	b := appendBytes(nil, 1, spec.Marshal())
	names := make([]string, 0, len(inputs))
	for k := range inputs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		entry := appendString(nil, 1, k)
		entry = appendBytes(entry, 2, inputs[k].Marshal())
		b = appendBytes(b, 2, entry)
	}
	for _, o := range outputFilter {
		b = appendString(b, 3, o)
	}
	return b
}

// Feature is one tf.train.Feature: exactly one of the lists is used (bytes first).
type Feature struct {
	Bytes  [][]byte
	Floats []float32
	Int64s []int64
}

// Example serializes a tf.train.Example{features{feature: map}} with the map sorted by name.
func Example(features map[string]Feature) []byte {
	names := make([]string, 0, len(features))
	for k := range features {
		names = append(names, k)
	}
	sort.Strings(names)
	var fs []byte
	for _, k := range names {
		f := features[k]
		var list []byte
		var num protowire.Number
		switch {
		case f.Bytes != nil:
			num = 1
			for _, v := range f.Bytes {
				list = appendBytes(list, 1, v)
			}
		case f.Floats != nil:
			num = 2
			list = appendPacked(list, 1, f.Floats, func(p []byte, v float32) []byte { return protowire.AppendFixed32(p, math.Float32bits(v)) })
		default:
			num = 3
			list = appendPacked(list, 1, f.Int64s, func(p []byte, v int64) []byte { return protowire.AppendVarint(p, uint64(v)) })
		}
		entry := appendString(nil, 1, k)
		entry = appendBytes(entry, 2, appendBytes(nil, num, list))
		fs = appendBytes(fs, 1, entry)
	}
	return appendBytes(nil, 1, fs)
}

// ClassificationRequest serializes a ClassificationRequest (RegressionRequest has the same
// layout): model_spec=1, input=2 {example_list=1 {examples=1}}; examples are serialized
// tf.Examples (Example).
func ClassificationRequest(spec ModelSpec, examples ...[]byte) []byte {
	var list []byte
	for _, e := range examples {
		list = appendBytes(list, 1, e)
	}
	input := appendBytes(nil, 1, list)
	b := appendBytes(nil, 1, spec.Marshal())
	return appendBytes(b, 2, input)
}

// RegressionRequest serializes a RegressionRequest (the layout of ClassificationRequest).
func RegressionRequest(spec ModelSpec, examples ...[]byte) []byte {
	return ClassificationRequest(spec, examples...)
}

// GetModelMetadataRequest serializes a GetModelMetadataRequest: model_spec=1,
// metadata_field=2 (the Python client sends "signature_def").
func GetModelMetadataRequest(spec ModelSpec, fields ...string) []byte {
	b := appendBytes(nil, 1, spec.Marshal())
	for _, f := range fields {
		b = appendString(b, 2, f)
	}
	return b
}

// GetModelStatusRequest serializes a GetModelStatusRequest: model_spec=1.
func GetModelStatusRequest(spec ModelSpec) []byte {
	return appendBytes(nil, 1, spec.Marshal())
}
