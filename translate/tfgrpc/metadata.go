package tfgrpc

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Field numbers of get_model_metadata.proto, get_model_status.proto,
// status.proto, meta_graph.proto and any.proto.
const (
	fMetaReqSpec   protowire.Number = 1
	fMetaReqFields protowire.Number = 2
	fMetaRespSpec  protowire.Number = 1
	fMetaRespMeta  protowire.Number = 2
	fAnyTypeURL    protowire.Number = 1
	fAnyValue      protowire.Number = 2
	fDefMapDefs    protowire.Number = 1 // SignatureDefMap.signature_def
	fDefInputs     protowire.Number = 1 // SignatureDef.inputs
	fDefOutputs    protowire.Number = 2 // SignatureDef.outputs
	fDefMethod     protowire.Number = 3 // SignatureDef.method_name
	fInfoName      protowire.Number = 1 // TensorInfo.name
	fInfoDtype     protowire.Number = 2
	fInfoShape     protowire.Number = 3

	fStatusReqSpec   protowire.Number = 1
	fStatusRespList  protowire.Number = 1 // model_version_status
	fMVSVersion      protowire.Number = 1
	fMVSState        protowire.Number = 2
	fMVSStatus       protowire.Number = 3
	fStatusErrorCode protowire.Number = 1
	fStatusErrorMsg  protowire.Number = 2
)

// SignatureDefMapURL is the type URL of the Any under "signature_def".
const SignatureDefMapURL = "type.googleapis.com/tensorflow.serving.SignatureDefMap"

// MetadataRequest is a decoded GetModelMetadataRequest.
type MetadataRequest struct {
	HasSpec bool
	Spec    ModelSpec
	// Fields are metadata_field as sent.
	Fields []string
}

// DecodeMetadataRequest decodes a GetModelMetadataRequest.
func DecodeMetadataRequest(msg []byte) (*MetadataRequest, error) {
	r := &MetadataRequest{}
	var spec message
	err := walk(msg, func(f *field) error {
		if f.Typ != protowire.BytesType {
			return nil
		}
		switch f.Num {
		case fMetaReqSpec:
			r.HasSpec = true
			return spec.add(f.V)
		case fMetaReqFields:
			s, err := str(f.V)
			if err != nil {
				return err
			}
			r.Fields = append(r.Fields, s)
		}
		return nil
	})
	if err == nil && r.HasSpec {
		r.Spec, err = DecodeModelSpec(spec.b)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// SignatureDef is one entry of the signature_def map.
type SignatureDef struct {
	Name      string
	Signature *tensor.Signature
	// Method is method_name ("tensorflow/serving/predict").
	Method string
}

// AppendMetadataResponse appends a GetModelMetadataResponse: model_spec
// {name, version} and metadata["signature_def"] = Any(SignatureDefMap).
// Each TensorInfo is {name: "<alias>:0" (v2 has no graph tensor names),
// dtype, tensor_shape (dims as declared, -1 kept)}; map entries sorted by
// key (TF's order is unspecified).
func AppendMetadataResponse(b []byte, spec ModelSpec, defs []SignatureDef) []byte {
	defs = slices.Clone(defs)
	slices.SortStableFunc(defs, func(x, y SignatureDef) int { return strings.Compare(x.Name, y.Name) })
	defsSize := 0
	for i := range defs {
		defsSize += sizeBytesField(entrySize(defs[i].Name, signatureDefSize(&defs[i])))
	}
	anySize := sizeBytesField(len(SignatureDefMapURL)) + sizeBytesField(defsSize)
	metaEntry := entrySize("signature_def", anySize)
	b = growExact(b, sizeBytesField(sizeModelSpec(&spec))+sizeBytesField(metaEntry))
	b = appendModelSpec(b, fMetaRespSpec, &spec)
	b = appendLenField(b, fMetaRespMeta, metaEntry)
	b = appendStringField(b, fMapKey, "signature_def")
	b = appendLenField(b, fMapValue, anySize)
	b = appendStringField(b, fAnyTypeURL, SignatureDefMapURL)
	b = appendLenField(b, fAnyValue, defsSize)
	for i := range defs {
		d := &defs[i]
		b = appendLenField(b, fDefMapDefs, entrySize(d.Name, signatureDefSize(d)))
		b = appendStringField(b, fMapKey, d.Name)
		b = appendLenField(b, fMapValue, signatureDefSize(d))
		b = appendSignatureDef(b, d)
	}
	return b
}

func sigSpecs(d *SignatureDef) (in, out []tensor.Spec) {
	if d.Signature == nil {
		return nil, nil
	}
	sortSpecs := func(s []tensor.Spec) []tensor.Spec {
		s = slices.Clone(s)
		slices.SortStableFunc(s, func(x, y tensor.Spec) int { return strings.Compare(x.Name, y.Name) })
		return s
	}
	return sortSpecs(d.Signature.Inputs), sortSpecs(d.Signature.Outputs)
}

func signatureDefSize(d *SignatureDef) int {
	in, out := sigSpecs(d)
	n := 0
	for _, s := range in {
		n += sizeBytesField(entrySize(s.Name, tensorInfoSize(&s)))
	}
	for _, s := range out {
		n += sizeBytesField(entrySize(s.Name, tensorInfoSize(&s)))
	}
	if d.Method != "" {
		n += sizeBytesField(len(d.Method))
	}
	return n
}

func appendSignatureDef(b []byte, d *SignatureDef) []byte {
	in, out := sigSpecs(d)
	b = appendInfoMap(b, fDefInputs, in)
	b = appendInfoMap(b, fDefOutputs, out)
	if d.Method != "" {
		b = appendStringField(b, fDefMethod, d.Method)
	}
	return b
}

func appendInfoMap(b []byte, num protowire.Number, specs []tensor.Spec) []byte {
	for i := range specs {
		s := &specs[i]
		size := tensorInfoSize(s)
		b = appendLenField(b, num, entrySize(s.Name, size))
		b = appendStringField(b, fMapKey, s.Name)
		b = appendLenField(b, fMapValue, size)
		b = appendStringField(b, fInfoName, s.Name+":0")
		if d := DTypeOf(s.DataType); d != DTInvalid {
			b = appendVarintField(b, fInfoDtype, uint64(d))
		}
		b = appendLenField(b, fInfoShape, sizeShape(s.Shape))
		for _, d := range s.Shape {
			if d == 0 {
				b = appendLenField(b, fShapeDim, 0)
				continue
			}
			b = appendLenField(b, fShapeDim, sizeVarintField(uint64(d)))
			b = appendVarintField(b, fDimSize, uint64(d))
		}
	}
	return b
}

func tensorInfoSize(s *tensor.Spec) int {
	n := sizeBytesField(len(s.Name) + 2)
	if d := DTypeOf(s.DataType); d != DTInvalid {
		n += sizeVarintField(uint64(d))
	}
	return n + sizeBytesField(sizeShape(s.Shape))
}

// StatusRequest is a decoded GetModelStatusRequest.
type StatusRequest struct {
	HasSpec bool
	Spec    ModelSpec
}

// DecodeStatusRequest decodes a GetModelStatusRequest.
func DecodeStatusRequest(msg []byte) (*StatusRequest, error) {
	r := &StatusRequest{}
	var spec message
	err := walk(msg, func(f *field) error {
		if f.Num == fStatusReqSpec && f.Typ == protowire.BytesType {
			r.HasSpec = true
			return spec.add(f.V)
		}
		return nil
	})
	if err == nil && r.HasSpec {
		r.Spec, err = DecodeModelSpec(spec.b)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ModelVersionState is ModelVersionStatus.State.
type ModelVersionState int32

// The states of get_model_status.proto.
const (
	StateUnknown   ModelVersionState = 0
	StateStart     ModelVersionState = 10
	StateLoading   ModelVersionState = 20
	StateAvailable ModelVersionState = 30
	StateUnloading ModelVersionState = 40
	StateEnd       ModelVersionState = 50
)

// VersionStatus is one ModelVersionStatus.
type VersionStatus struct {
	Version int64
	State   ModelVersionState
	// ErrorCode and ErrorMessage are its StatusProto (0 and "" for OK:
	// TF sets error_message only for an error).
	ErrorCode    int32
	ErrorMessage string
}

// AppendStatusResponse appends a GetModelStatusResponse listing versions
// in the order given (TF lists them by descending version).
func AppendStatusResponse(b []byte, versions []VersionStatus) []byte {
	for _, v := range versions {
		st := 0
		if v.ErrorCode != 0 {
			st += sizeVarintField(uint64(int64(v.ErrorCode)))
		}
		if v.ErrorMessage != "" {
			st += sizeBytesField(len(v.ErrorMessage))
		}
		n := sizeBytesField(st)
		if v.Version != 0 {
			n += sizeVarintField(uint64(v.Version))
		}
		if v.State != 0 {
			n += sizeVarintField(uint64(int64(v.State)))
		}
		b = appendLenField(b, fStatusRespList, n)
		if v.Version != 0 {
			b = appendVarintField(b, fMVSVersion, uint64(v.Version))
		}
		if v.State != 0 {
			b = appendVarintField(b, fMVSState, uint64(int64(v.State)))
		}
		// status is always set by TF (mutable_status), so always written.
		b = appendLenField(b, fMVSStatus, st)
		if v.ErrorCode != 0 {
			b = appendVarintField(b, fStatusErrorCode, uint64(int64(v.ErrorCode)))
		}
		if v.ErrorMessage != "" {
			b = appendStringField(b, fStatusErrorMsg, v.ErrorMessage)
		}
	}
	return b
}
