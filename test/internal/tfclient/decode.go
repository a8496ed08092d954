package tfclient

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// errMalformed reports bytes that are not a valid protobuf message.
var errMalformed = errors.New("tfclient: malformed protobuf message")

// field is one field occurrence: v for length-delimited fields, u for the others.
type field struct {
	num protowire.Number
	typ protowire.Type
	v   []byte
	u   uint64
}

// walk calls f for every field of msg in wire order.
func walk(msg []byte, f func(fl field) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return errMalformed
		}
		msg = msg[n:]
		fl := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			fl.u, n = protowire.ConsumeVarint(msg)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(msg)
			fl.u = uint64(x)
		case protowire.Fixed64Type:
			fl.u, n = protowire.ConsumeFixed64(msg)
		case protowire.BytesType:
			fl.v, n = protowire.ConsumeBytes(msg)
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return errMalformed
		}
		msg = msg[n:]
		if err := f(fl); err != nil {
			return err
		}
	}
	return nil
}

// scalars reads a repeated scalar field occurrence, packed or not, with width w (0 varint,
// 4 fixed32, 8 fixed64), calling add for each value.
func scalars(fl field, w int, add func(u uint64)) error {
	if fl.typ != protowire.BytesType {
		add(fl.u)
		return nil
	}
	p := fl.v
	for len(p) > 0 {
		var u uint64
		var n int
		switch w {
		case 4:
			var x uint32
			x, n = protowire.ConsumeFixed32(p)
			u = uint64(x)
		case 8:
			u, n = protowire.ConsumeFixed64(p)
		default:
			u, n = protowire.ConsumeVarint(p)
		}
		if n < 0 {
			return errMalformed
		}
		add(u)
		p = p[n:]
	}
	return nil
}

// DecodeTensorProto decodes a TensorProto (both packed and unpacked scalar fields).
func DecodeTensorProto(msg []byte) (TensorProto, error) {
	var t TensorProto
	err := walk(msg, func(fl field) error {
		switch fl.num {
		case fDType:
			t.DType = DType(int32(fl.u))
		case fShape:
			t.Shape = []int64{}
			return walk(fl.v, func(d field) error {
				if d.num != 2 {
					return nil
				}
				var size int64
				err := walk(d.v, func(s field) error {
					if s.num == 1 {
						size = int64(s.u)
					}
					return nil
				})
				t.Shape = append(t.Shape, size)
				return err
			})
		case fContent:
			t.TensorContent = append([]byte(nil), fl.v...)
		case fFloatVal:
			return scalars(fl, 4, func(u uint64) { t.FloatVal = append(t.FloatVal, math.Float32frombits(uint32(u))) })
		case fDoubleVal:
			return scalars(fl, 8, func(u uint64) { t.DoubleVal = append(t.DoubleVal, math.Float64frombits(u)) })
		case fIntVal:
			return scalars(fl, 0, func(u uint64) { t.IntVal = append(t.IntVal, int32(u)) })
		case fStringVal:
			t.StringVal = append(t.StringVal, append([]byte{}, fl.v...))
		case fInt64Val:
			return scalars(fl, 0, func(u uint64) { t.Int64Val = append(t.Int64Val, int64(u)) })
		case fBoolVal:
			return scalars(fl, 0, func(u uint64) { t.BoolVal = append(t.BoolVal, u != 0) })
		case fHalfVal:
			return scalars(fl, 0, func(u uint64) { t.HalfVal = append(t.HalfVal, int32(u)) })
		case fUint32Val:
			return scalars(fl, 0, func(u uint64) { t.Uint32Val = append(t.Uint32Val, uint32(u)) })
		case fUint64Val:
			return scalars(fl, 0, func(u uint64) { t.Uint64Val = append(t.Uint64Val, u) })
		}
		return nil
	})
	return t, err
}

// DecodeModelSpec decodes a ModelSpec.
func DecodeModelSpec(msg []byte) (ModelSpec, error) {
	var s ModelSpec
	err := walk(msg, func(fl field) error {
		switch fl.num {
		case 1:
			s.Name = string(fl.v)
		case 2:
			v := int64(0)
			s.Version = &v
			return walk(fl.v, func(x field) error {
				if x.num == 1 {
					v = int64(x.u)
					s.Version = &v
				}
				return nil
			})
		case 3:
			s.SignatureName = string(fl.v)
		case 4:
			s.Label = string(fl.v)
		}
		return nil
	})
	return s, err
}

// mapEntry decodes a map<string, message> entry: key=1, value=2.
func mapEntry(msg []byte) (string, []byte, error) {
	var k string
	var v []byte
	err := walk(msg, func(fl field) error {
		switch fl.num {
		case 1:
			k = string(fl.v)
		case 2:
			v = fl.v
		}
		return nil
	})
	return k, v, err
}

// PredictResponse is a decoded tensorflow.serving.PredictResponse.
type PredictResponse struct {
	Outputs   map[string]TensorProto
	ModelSpec ModelSpec
	// HasModelSpec reports that model_spec was present.
	HasModelSpec bool
}

// DecodePredictResponse decodes a PredictResponse: outputs=1 (map), model_spec=2.
func DecodePredictResponse(msg []byte) (*PredictResponse, error) {
	r := &PredictResponse{Outputs: map[string]TensorProto{}}
	err := walk(msg, func(fl field) error {
		switch fl.num {
		case 1:
			k, v, err := mapEntry(fl.v)
			if err != nil {
				return err
			}
			t, err := DecodeTensorProto(v)
			if err != nil {
				return fmt.Errorf("output %q: %w", k, err)
			}
			r.Outputs[k] = t
		case 2:
			s, err := DecodeModelSpec(fl.v)
			r.ModelSpec, r.HasModelSpec = s, true
			return err
		}
		return nil
	})
	return r, err
}

// Class is one tensorflow.serving.Class.
type Class struct {
	Label string
	Score float32
}

// ClassificationResponse is a decoded ClassificationResponse: one []Class per example.
type ClassificationResponse struct {
	Classifications [][]Class
	ModelSpec       ModelSpec
}

// DecodeClassificationResponse decodes result=1 {classifications=1 {classes=1 {label=1,
// score=2}}}, model_spec=2.
func DecodeClassificationResponse(msg []byte) (*ClassificationResponse, error) {
	r := &ClassificationResponse{}
	err := walk(msg, func(fl field) error {
		switch fl.num {
		case 1:
			return walk(fl.v, func(c field) error {
				if c.num != 1 {
					return nil
				}
				classes := []Class{}
				err := walk(c.v, func(cl field) error {
					if cl.num != 1 {
						return nil
					}
					var x Class
					err := walk(cl.v, func(f field) error {
						switch f.num {
						case 1:
							x.Label = string(f.v)
						case 2:
							x.Score = math.Float32frombits(uint32(f.u))
						}
						return nil
					})
					classes = append(classes, x)
					return err
				})
				r.Classifications = append(r.Classifications, classes)
				return err
			})
		case 2:
			s, err := DecodeModelSpec(fl.v)
			r.ModelSpec = s
			return err
		}
		return nil
	})
	return r, err
}

// RegressionResponse is a decoded RegressionResponse: one value per example.
type RegressionResponse struct {
	Values    []float32
	ModelSpec ModelSpec
}

// DecodeRegressionResponse decodes result=1 {regressions=1 {value=1}}, model_spec=2.
func DecodeRegressionResponse(msg []byte) (*RegressionResponse, error) {
	r := &RegressionResponse{}
	err := walk(msg, func(fl field) error {
		switch fl.num {
		case 1:
			return walk(fl.v, func(rg field) error {
				if rg.num != 1 {
					return nil
				}
				var v float32
				err := walk(rg.v, func(f field) error {
					if f.num == 1 {
						v = math.Float32frombits(uint32(f.u))
					}
					return nil
				})
				r.Values = append(r.Values, v)
				return err
			})
		case 2:
			s, err := DecodeModelSpec(fl.v)
			r.ModelSpec = s
			return err
		}
		return nil
	})
	return r, err
}

// TensorInfo is tensorflow.TensorInfo: name=1, dtype=2, tensor_shape=3.
type TensorInfo struct {
	Name  string
	DType DType
	// Shape is the dims (-1 for unknown); nil when tensor_shape is absent.
	Shape []int64
}

// SignatureDef is tensorflow.SignatureDef: inputs=1, outputs=2, method_name=3.
type SignatureDef struct {
	Inputs, Outputs map[string]TensorInfo
	MethodName      string
}

// MetadataResponse is a decoded GetModelMetadataResponse whose metadata["signature_def"]
// holds a SignatureDefMap.
type MetadataResponse struct {
	ModelSpec ModelSpec
	// TypeURL is the Any's type_url of metadata["signature_def"].
	TypeURL       string
	SignatureDefs map[string]SignatureDef
}

// SignatureDefMapURL is the type_url TF Serving puts on the signature_def metadata.
const SignatureDefMapURL = "type.googleapis.com/tensorflow.serving.SignatureDefMap"

// DecodeMetadataResponse decodes model_spec=1, metadata=2 (map<string, Any>).
func DecodeMetadataResponse(msg []byte) (*MetadataResponse, error) {
	r := &MetadataResponse{SignatureDefs: map[string]SignatureDef{}}
	err := walk(msg, func(fl field) error {
		switch fl.num {
		case 1:
			s, err := DecodeModelSpec(fl.v)
			r.ModelSpec = s
			return err
		case 2:
			k, anyMsg, err := mapEntry(fl.v)
			if err != nil || k != "signature_def" {
				return err
			}
			var value []byte
			if err := walk(anyMsg, func(a field) error {
				switch a.num {
				case 1:
					r.TypeURL = string(a.v)
				case 2:
					value = a.v
				}
				return nil
			}); err != nil {
				return err
			}
			return walk(value, func(e field) error {
				if e.num != 1 {
					return nil
				}
				name, def, err := mapEntry(e.v)
				if err != nil {
					return err
				}
				sd, err := decodeSignatureDef(def)
				r.SignatureDefs[name] = sd
				return err
			})
		}
		return nil
	})
	return r, err
}

func decodeSignatureDef(msg []byte) (SignatureDef, error) {
	sd := SignatureDef{Inputs: map[string]TensorInfo{}, Outputs: map[string]TensorInfo{}}
	err := walk(msg, func(fl field) error {
		switch fl.num {
		case 1, 2:
			k, v, err := mapEntry(fl.v)
			if err != nil {
				return err
			}
			var ti TensorInfo
			err = walk(v, func(f field) error {
				switch f.num {
				case 1:
					ti.Name = string(f.v)
				case 2:
					ti.DType = DType(int32(f.u))
				case 3:
					shape, err := DecodeTensorProto(appendBytes(nil, fShape, f.v))
					ti.Shape = shape.Shape
					return err
				}
				return nil
			})
			if fl.num == 1 {
				sd.Inputs[k] = ti
			} else {
				sd.Outputs[k] = ti
			}
			return err
		case 3:
			sd.MethodName = string(fl.v)
		}
		return nil
	})
	return sd, err
}

// ModelVersionStatus is one entry of GetModelStatusResponse.model_version_status.
type ModelVersionStatus struct {
	Version int64
	// State: UNKNOWN 0, START 10, LOADING 20, AVAILABLE 30, UNLOADING 40, END 50.
	State        int32
	ErrorCode    int32
	ErrorMessage string
}

// DecodeStatusResponse decodes model_version_status=1 {version=1, state=2, status=3
// {error_code=1, error_message=2}}.
func DecodeStatusResponse(msg []byte) ([]ModelVersionStatus, error) {
	var out []ModelVersionStatus
	err := walk(msg, func(fl field) error {
		if fl.num != 1 {
			return nil
		}
		var s ModelVersionStatus
		err := walk(fl.v, func(f field) error {
			switch f.num {
			case 1:
				s.Version = int64(f.u)
			case 2:
				s.State = int32(f.u)
			case 3:
				return walk(f.v, func(e field) error {
					switch e.num {
					case 1:
						s.ErrorCode = int32(e.u)
					case 2:
						s.ErrorMessage = string(e.v)
					}
					return nil
				})
			}
			return nil
		})
		out = append(out, s)
		return err
	})
	return out, err
}
