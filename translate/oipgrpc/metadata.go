package oipgrpc

import (
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Field numbers of ModelMetadata* and ModelReady*.
const (
	fReqName       protowire.Number = 1 // ModelMetadataRequest / ModelReadyRequest
	fReqVersion    protowire.Number = 2
	fMetaName      protowire.Number = 1
	fMetaVersions  protowire.Number = 2
	fMetaPlatform  protowire.Number = 3
	fMetaInputs    protowire.Number = 4
	fMetaOutputs   protowire.Number = 5
	fMetaTName     protowire.Number = 1
	fMetaTDatatype protowire.Number = 2
	fMetaTShape    protowire.Number = 3
	fReadyReady    protowire.Number = 1
)

// Bounds on what model metadata may declare, as translate/oip's JSON
// reader bounds them (each predict request allocates per input; TF's
// metadata and status answers grow per dimension and per version).
const (
	maxSignatureTensors = 4096
	maxSignatureDims    = 1 << 16
	maxVersions         = 4096
)

// AppendModelRequest appends a ModelMetadataRequest or ModelReadyRequest
// (the same fields): name and version ("" for the server's choice).
func AppendModelRequest(dst []byte, name, version string) []byte {
	dst = appendStringField(dst, fReqName, name)
	return appendStringField(dst, fReqVersion, version)
}

// DecodeModelRequest decodes a ModelMetadataRequest or ModelReadyRequest.
func DecodeModelRequest(msg []byte) (name, version string, err error) {
	err = walk(msg, func(f *field) error {
		if f.Typ != protowire.BytesType {
			return nil
		}
		var err error
		switch f.Num {
		case fReqName:
			name, err = str(f.V)
		case fReqVersion:
			version, err = str(f.V)
		}
		return err
	})
	if err != nil {
		return "", "", bad("model request", err, "%v", err)
	}
	return name, version, nil
}

// DecodeModelMetadata turns a ModelMetadataResponse into a signature, as
// oip.ParseModelMetadata does for the JSON one: names required and unique,
// datatypes known (upper-cased for KServe custom models), dimensions at
// least -1, Batched when every input leads with -1.
func DecodeModelMetadata(msg []byte) (*tensor.Signature, error) {
	sig := &tensor.Signature{}
	var inputs, outputs [][]byte
	err := walk(msg, func(f *field) error {
		if f.Typ != protowire.BytesType {
			return nil
		}
		var err error
		switch f.Num {
		case fMetaName:
			sig.Model, err = str(f.V)
		case fMetaVersions:
			var v string
			v, err = str(f.V)
			if len(sig.Versions) >= maxVersions {
				return bad("model metadata", nil, "more than %d versions", maxVersions)
			}
			sig.Versions = append(sig.Versions, v)
		case fMetaPlatform:
			sig.Platform, err = str(f.V)
		case fMetaInputs:
			inputs = append(inputs, f.V)
		case fMetaOutputs:
			outputs = append(outputs, f.V)
		}
		return err
	})
	if err != nil {
		return nil, wrapBad("model metadata", err)
	}
	dims := 0
	if sig.Inputs, err = metaSpecs("input", inputs, &dims); err != nil {
		return nil, err
	}
	if sig.Outputs, err = metaSpecs("output", outputs, &dims); err != nil {
		return nil, err
	}
	sig.Batched = oip.LeadingBatchDim(sig.Inputs)
	return sig, nil
}

func metaSpecs(what string, ts [][]byte, dims *int) ([]tensor.Spec, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	if len(ts) > maxSignatureTensors {
		return nil, bad("model metadata", nil, "%d %ss, more than the limit of %d", len(ts), what, maxSignatureTensors)
	}
	specs := make([]tensor.Spec, len(ts))
	seen := make(map[string]struct{}, len(ts))
	for i, b := range ts {
		sp := &specs[i]
		var dt string
		err := walk(b, func(f *field) error {
			var err error
			switch {
			case f.Num == fMetaTName && f.Typ == protowire.BytesType:
				sp.Name, err = str(f.V)
			case f.Num == fMetaTDatatype && f.Typ == protowire.BytesType:
				dt, err = str(f.V)
			case f.Num == fMetaTShape && (f.Typ == protowire.VarintType || f.Typ == protowire.BytesType):
				if sp.Shape, err = appendInt64s(sp.Shape, f); err != nil {
					return err
				}
			}
			if *dims+len(sp.Shape) > maxSignatureDims {
				return bad("model metadata", nil, "more than %d dimensions in all", maxSignatureDims)
			}
			return err
		})
		if err != nil {
			return nil, wrapBad("model metadata", err)
		}
		*dims += len(sp.Shape)
		if sp.Name == "" {
			return nil, bad("model metadata", nil, "%s %d has no name", what, i)
		}
		if _, dup := seen[sp.Name]; dup {
			return nil, bad("model metadata", nil, "duplicate %s %q", what, sp.Name)
		}
		seen[sp.Name] = struct{}{}
		d, ok := tensor.ParseV2(dt)
		if !ok {
			d, ok = tensor.ParseV2(strings.ToUpper(dt))
		}
		if !ok {
			return nil, bad("model metadata", nil, "%s %q has unknown datatype %q", what, sp.Name, dt)
		}
		sp.DataType = d
		for _, x := range sp.Shape {
			if x < -1 {
				return nil, bad("model metadata", nil, "%s %q has invalid dimension %d", what, sp.Name, x)
			}
		}
	}
	return specs, nil
}

// AppendModelMetadata appends the ModelMetadataResponse describing sig
// (tests and the mock server).
func AppendModelMetadata(dst []byte, sig *tensor.Signature) []byte {
	dst = appendStringField(dst, fMetaName, sig.Model)
	for _, v := range sig.Versions {
		dst = protowire.AppendTag(dst, fMetaVersions, protowire.BytesType)
		dst = protowire.AppendString(dst, v)
	}
	dst = appendStringField(dst, fMetaPlatform, sig.Platform)
	for num, specs := range [][]tensor.Spec{sig.Inputs, sig.Outputs} {
		for _, s := range specs {
			size := sizeStringField(fMetaTName, s.Name) + sizeStringField(fMetaTDatatype, s.DataType.String())
			if len(s.Shape) > 0 {
				size += sizeBytesField(fMetaTShape, shapeSize(s.Shape))
			}
			dst = appendLenField(dst, fMetaInputs+protowire.Number(num), size)
			dst = appendStringField(dst, fMetaTName, s.Name)
			dst = appendStringField(dst, fMetaTDatatype, s.DataType.String())
			if len(s.Shape) > 0 {
				dst = appendLenField(dst, fMetaTShape, shapeSize(s.Shape))
				for _, d := range s.Shape {
					dst = protowire.AppendVarint(dst, uint64(d))
				}
			}
		}
	}
	return dst
}

// DecodeModelReady reads a ModelReadyResponse's ready flag.
func DecodeModelReady(msg []byte) (bool, error) {
	ready := false
	err := walk(msg, func(f *field) error {
		if f.Num == fReadyReady && f.Typ == protowire.VarintType {
			ready = f.U != 0
		}
		return nil
	})
	if err != nil {
		return false, bad("ModelReadyResponse", err, "%v", err)
	}
	return ready, nil
}

// AppendModelReady appends a ModelReadyResponse.
func AppendModelReady(dst []byte, ready bool) []byte {
	if !ready {
		return dst
	}
	dst = protowire.AppendTag(dst, fReadyReady, protowire.VarintType)
	return protowire.AppendVarint(dst, 1)
}
