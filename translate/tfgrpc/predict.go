package tfgrpc

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of model.proto and predict.proto.
const (
	fSpecName      protowire.Number = 1
	fSpecVersion   protowire.Number = 2
	fSpecSignature protowire.Number = 3
	fSpecLabel     protowire.Number = 4

	fPredReqSpec   protowire.Number = 1
	fPredReqInputs protowire.Number = 2
	fPredReqFilter protowire.Number = 3

	fPredRespOutputs protowire.Number = 1
	fPredRespSpec    protowire.Number = 2

	fMapKey   protowire.Number = 1
	fMapValue protowire.Number = 2
)

// ModelSpec is tensorflow.serving.ModelSpec.
type ModelSpec struct {
	Name string
	// Version is version.value, meaningful when HasVersion (0 included:
	// TF asks for Specific(m, 0)).
	Version    int64
	HasVersion bool
	// VersionLabel is version_label; the oneof keeps at most one of it
	// and HasVersion.
	VersionLabel  string
	SignatureName string
}

// DecodeModelSpec decodes a ModelSpec message.
func DecodeModelSpec(msg []byte) (ModelSpec, error) {
	var s ModelSpec
	err := walk(msg, func(f *field) error {
		if f.Typ != protowire.BytesType {
			return nil
		}
		var err error
		switch f.Num {
		case fSpecName:
			s.Name, err = str(f.V)
		case fSpecVersion:
			// A repeated Int64Value merges: the last value wins, and an
			// empty one keeps the previous value (0 when none).
			if !s.HasVersion {
				s.Version = 0
			}
			s.HasVersion, s.VersionLabel = true, ""
			err = walk(f.V, func(v *field) error {
				if v.Num == fInt64ValueValue && v.Typ == protowire.VarintType {
					s.Version = int64(v.U)
				}
				return nil
			})
		case fSpecLabel:
			s.VersionLabel, err = str(f.V)
			s.HasVersion, s.Version = false, 0
		case fSpecSignature:
			s.SignatureName, err = str(f.V)
		}
		return err
	})
	return s, err
}

// sizeModelSpec is the encoded size of s (without its field header).
func sizeModelSpec(s *ModelSpec) int {
	n := 0
	if s.Name != "" {
		n += sizeBytesField(len(s.Name))
	}
	if s.HasVersion {
		n += sizeBytesField(versionSize(s.Version))
	} else if s.VersionLabel != "" {
		n += sizeBytesField(len(s.VersionLabel))
	}
	if s.SignatureName != "" {
		n += sizeBytesField(len(s.SignatureName))
	}
	return n
}

func versionSize(v int64) int {
	if v == 0 {
		return 0
	}
	return sizeVarintField(uint64(v))
}

// appendModelSpec appends s as field num, fields in number order as
// protobuf's C++ serializer writes them.
func appendModelSpec(b []byte, num protowire.Number, s *ModelSpec) []byte {
	b = appendLenField(b, num, sizeModelSpec(s))
	return appendModelSpecFields(b, s)
}

// appendModelSpecFields appends s's fields, without a field header.
func appendModelSpecFields(b []byte, s *ModelSpec) []byte {
	if s.Name != "" {
		b = appendStringField(b, fSpecName, s.Name)
	}
	if s.HasVersion {
		b = appendLenField(b, fSpecVersion, versionSize(s.Version))
		if s.Version != 0 {
			b = appendVarintField(b, fInt64ValueValue, uint64(s.Version))
		}
	}
	if s.SignatureName != "" {
		b = appendStringField(b, fSpecSignature, s.SignatureName)
	}
	if !s.HasVersion && s.VersionLabel != "" {
		b = appendStringField(b, fSpecLabel, s.VersionLabel)
	}
	return b
}

// AppendModelSpec appends s as a whole ModelSpec message (for tests and
// clients).
func AppendModelSpec(b []byte, s ModelSpec) []byte {
	return appendModelSpecFields(b, &s)
}

// NamedTensor is one entry of a map<string, TensorProto>.
type NamedTensor struct {
	Name   string
	Tensor TensorProto
}

// PredictRequest is a decoded tensorflow.serving.PredictRequest. Tensor
// contents alias the message.
type PredictRequest struct {
	// HasSpec reports that model_spec was sent (TF: "Missing ModelSpec").
	HasSpec bool
	Spec    ModelSpec
	// Inputs are the map's entries in wire order, each name once (the
	// last entry of a name wins, as protobuf maps read).
	Inputs []NamedTensor
	// OutputFilter is output_filter as sent.
	OutputFilter []string
}

// maxMapScan is how many entries a map is searched linearly for a
// duplicate name before an index is built.
const maxMapScan = 16

// DecodePredictRequest decodes a PredictRequest. Fields Predict ignores
// (predict_streamed_options, client_id, request_options) are skipped.
func DecodePredictRequest(msg []byte) (*PredictRequest, error) {
	r := &PredictRequest{}
	var spec message
	var index map[string]int
	err := walk(msg, func(f *field) error {
		if f.Typ != protowire.BytesType {
			return nil
		}
		switch f.Num {
		case fPredReqSpec:
			r.HasSpec = true
			return spec.add(f.V)
		case fPredReqInputs:
			name, value, err := decodeEntry(f.V)
			if err != nil {
				return err
			}
			t, err := DecodeTensorProto(value)
			if err != nil {
				return err
			}
			index = putEntry(&r.Inputs, index, NamedTensor{Name: name, Tensor: t})
		case fPredReqFilter:
			s, err := str(f.V)
			if err != nil {
				return err
			}
			r.OutputFilter = append(r.OutputFilter, s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if r.HasSpec {
		if r.Spec, err = DecodeModelSpec(spec.b); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// putEntry adds e to *list, replacing an entry of the same name; index
// is built once the list is long.
func putEntry(list *[]NamedTensor, index map[string]int, e NamedTensor) map[string]int {
	l := *list
	if index == nil && len(l) >= maxMapScan {
		index = make(map[string]int, 2*len(l))
		for i := range l {
			index[l[i].Name] = i
		}
	}
	if index != nil {
		if i, ok := index[e.Name]; ok {
			l[i] = e
			return index
		}
		index[e.Name] = len(l)
	} else {
		for i := range l {
			if l[i].Name == e.Name {
				l[i] = e
				return index
			}
		}
	}
	*list = append(l, e)
	return index
}

// decodeEntry decodes a map<string, message> entry: an absent key is "",
// an absent value the empty message; repeated values merge.
func decodeEntry(b []byte) (key string, value []byte, err error) {
	var v message
	err = walk(b, func(f *field) error {
		if f.Typ != protowire.BytesType {
			return nil
		}
		switch f.Num {
		case fMapKey:
			var err error
			key, err = str(f.V)
			return err
		case fMapValue:
			return v.add(f.V)
		}
		return nil
	})
	return key, v.b, err
}
