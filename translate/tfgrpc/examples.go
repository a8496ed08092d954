package tfgrpc

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Field numbers of classification.proto, regression.proto, input.proto and
// tensorflow/core/example/{example,feature}.proto.
const (
	fExReqSpec  protowire.Number = 1
	fExReqInput protowire.Number = 2

	fInputList        protowire.Number = 1 // Input.example_list
	fInputListContext protowire.Number = 2 // Input.example_list_with_context
	fListExamples     protowire.Number = 1 // ExampleList(WithContext).examples
	fListContext      protowire.Number = 2 // ExampleListWithContext.context

	fExampleFeatures protowire.Number = 1 // Example.features
	fFeaturesFeature protowire.Number = 1 // Features.feature map
	fFeatureBytes    protowire.Number = 1 // Feature.bytes_list
	fFeatureFloats   protowire.Number = 2 // Feature.float_list
	fFeatureInt64s   protowire.Number = 3 // Feature.int64_list
	fListValue       protowire.Number = 1 // *List.value

	fRespResult          protowire.Number = 1 // Classification/RegressionResponse.result
	fRespSpec            protowire.Number = 2 // .model_spec
	fResultItems         protowire.Number = 1 // classifications / regressions
	fClassificationsList protowire.Number = 1 // Classifications.classes
	fClassLabel          protowire.Number = 1
	fClassScore          protowire.Number = 2
	fRegressionValue     protowire.Number = 1
)

// ExamplesRequest is a decoded ClassificationRequest or RegressionRequest.
type ExamplesRequest struct {
	HasSpec bool
	Spec    ModelSpec
	// Examples are the serialized tf.Examples TF Serving's
	// InputToSerializedExampleTensor feeds the model: each example's
	// bytes as received (aliasing the message), or, with a context, the
	// context's bytes followed by the example's, which a protobuf parser
	// reads as their merge (the example's features win). TF re-serializes
	// both; the bytes differ at most in field order, the parse is the
	// same.
	Examples [][]byte
}

// DecodeExamplesRequest decodes a ClassificationRequest or
// RegressionRequest (the same fields). Every example is checked to be a
// well-formed tf.Example, as TF Serving's parser would. maxBytes bounds
// the serialized examples' total size (a context is repeated in every
// example); over it, ok is false.
func DecodeExamplesRequest(msg []byte, maxBytes int64) (r *ExamplesRequest, ok bool, err error) {
	r = &ExamplesRequest{}
	var spec, input message
	err = walk(msg, func(f *field) error {
		if f.Typ != protowire.BytesType {
			return nil
		}
		switch f.Num {
		case fExReqSpec:
			r.HasSpec = true
			return spec.add(f.V)
		case fExReqInput:
			return input.add(f.V)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if r.HasSpec {
		if r.Spec, err = DecodeModelSpec(spec.b); err != nil {
			return nil, false, err
		}
	}
	// Input is a oneof of two messages: the last one sent wins (and a
	// repeated one merges).
	var list message
	withContext := false
	err = walk(input.b, func(f *field) error {
		if f.Typ != protowire.BytesType || (f.Num != fInputList && f.Num != fInputListContext) {
			return nil
		}
		if ctx := f.Num == fInputListContext; ctx != withContext {
			list, withContext = message{}, ctx // the other member of the oneof
		}
		return list.add(f.V)
	})
	if err != nil {
		return nil, false, err
	}
	var examples [][]byte
	var context message
	err = walk(list.b, func(f *field) error {
		if f.Typ != protowire.BytesType {
			return nil
		}
		switch {
		case f.Num == fListExamples:
			if err := checkExample(f.V); err != nil {
				return err
			}
			examples = append(examples, f.V)
		case f.Num == fListContext && withContext:
			if err := checkExample(f.V); err != nil {
				return err
			}
			return context.add(f.V)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	total := int64(0)
	for _, e := range examples {
		total += int64(len(context.b) + len(e))
	}
	if maxBytes > 0 && total > maxBytes {
		return nil, false, nil
	}
	if len(context.b) > 0 {
		buf := make([]byte, 0, total)
		for i, e := range examples {
			start := len(buf)
			buf = append(append(buf, context.b...), e...)
			examples[i] = buf[start:len(buf):len(buf)]
		}
	}
	r.Examples = examples
	return r, true, nil
}

// checkExample checks that b is a well-formed tf.Example: the wire, the
// feature map's UTF-8 keys, the packed lists.
func checkExample(b []byte) error {
	return walk(b, func(f *field) error {
		if f.Num != fExampleFeatures || f.Typ != protowire.BytesType {
			return nil
		}
		return walk(f.V, func(f *field) error {
			if f.Num != fFeaturesFeature || f.Typ != protowire.BytesType {
				return nil
			}
			_, feature, err := decodeEntry(f.V)
			if err != nil {
				return err
			}
			return walk(feature, func(f *field) error {
				if f.Typ != protowire.BytesType || f.Num < fFeatureBytes || f.Num > fFeatureInt64s {
					return nil
				}
				num := f.Num
				return walk(f.V, func(f *field) error {
					if f.Num != fListValue || f.Typ != protowire.BytesType {
						return nil
					}
					switch num {
					case fFeatureFloats:
						if _, ok := packedCount(f.V, protowire.Fixed32Type); !ok {
							return ErrMalformed
						}
					case fFeatureInt64s:
						if _, ok := packedCount(f.V, protowire.VarintType); !ok {
							return ErrMalformed
						}
					}
					return nil
				})
			})
		})
	})
}

// AppendClassificationResponse appends a ClassificationResponse for n
// examples of k classes each: labels from classes (BYTES [n,k], nil: ""),
// scores from scores (FP32 [n,k], nil: 0), as TF Serving's
// PostProcessClassificationResult fills it. The tensors must have passed
// its checks (tfresponse.NewClassify).
func AppendClassificationResponse(b []byte, classes, scores *tensor.Tensor, n, k int, spec ModelSpec) []byte {
	class := func(j int) (label []byte, score uint32) {
		if classes != nil {
			label = classes.Strings[j]
		}
		if scores != nil {
			score = binary.LittleEndian.Uint32(scores.Data[4*j:])
		}
		return
	}
	classSize := func(j int) int {
		label, score := class(j)
		s := 0
		if len(label) > 0 {
			s += sizeBytesField(len(label))
		}
		if score != 0 {
			s += 5
		}
		return s
	}
	itemSize := func(i int) int {
		s := 0
		for j := i * k; j < (i+1)*k; j++ {
			s += sizeBytesField(classSize(j))
		}
		return s
	}
	result := 0
	for i := range n {
		result += sizeBytesField(itemSize(i))
	}
	b = growExact(b, sizeBytesField(result)+sizeBytesField(sizeModelSpec(&spec)))
	b = appendLenField(b, fRespResult, result)
	for i := range n {
		b = appendLenField(b, fResultItems, itemSize(i))
		for j := i * k; j < (i+1)*k; j++ {
			b = appendLenField(b, fClassificationsList, classSize(j))
			label, score := class(j)
			if len(label) > 0 {
				b = appendBytesField(b, fClassLabel, label)
			}
			if score != 0 {
				b = protowire.AppendTag(b, fClassScore, protowire.Fixed32Type)
				b = protowire.AppendFixed32(b, score)
			}
		}
	}
	return appendModelSpec(b, fRespSpec, &spec)
}

// AppendRegressionResponse appends a RegressionResponse with one value
// per example, read from outputs (FP32 [n] or [n,1], checked by
// tfresponse.NewRegress).
func AppendRegressionResponse(b []byte, outputs *tensor.Tensor, n int, spec ModelSpec) []byte {
	value := func(i int) uint32 { return binary.LittleEndian.Uint32(outputs.Data[4*i:]) }
	result := 0
	for i := range n {
		result += sizeBytesField(valueSize(value(i)))
	}
	b = growExact(b, sizeBytesField(result)+sizeBytesField(sizeModelSpec(&spec)))
	b = appendLenField(b, fRespResult, result)
	for i := range n {
		v := value(i)
		b = appendLenField(b, fResultItems, valueSize(v))
		if v != 0 {
			b = protowire.AppendTag(b, fRegressionValue, protowire.Fixed32Type)
			b = protowire.AppendFixed32(b, v)
		}
	}
	return appendModelSpec(b, fRespSpec, &spec)
}

// valueSize is a proto3 float field's size: absent when its bits are 0
// (-0.0 is written, as protobuf compares bits).
func valueSize(bits uint32) int {
	if bits == 0 {
		return 0
	}
	return 5
}
