package tfclient

import (
	"fmt"
	"math"

	"github.com/tfsbridge/tfsbridge/internal/pbwire"
)

// DecodeTensorProto decodes a TensorProto (both packed and unpacked scalar fields).
func DecodeTensorProto(msg []byte) (TensorProto, error) {
	var t TensorProto
	err := pbwire.Walk(msg, func(fl *pbwire.Field) error {
		switch fl.Num {
		case fDType:
			t.DType = DType(int32(fl.U))
		case fShape:
			t.Shape = []int64{}
			return pbwire.Walk(fl.V, func(d *pbwire.Field) error {
				if d.Num != 2 {
					return nil
				}
				var size int64
				err := pbwire.Walk(d.V, func(s *pbwire.Field) error {
					if s.Num == 1 {
						size = int64(s.U)
					}
					return nil
				})
				t.Shape = append(t.Shape, size)
				return err
			})
		case fContent:
			t.TensorContent = append([]byte(nil), fl.V...)
		case fFloatVal:
			return pbwire.Scalars(fl, pbwire.Fixed32, func(u uint64) { t.FloatVal = append(t.FloatVal, math.Float32frombits(uint32(u))) })
		case fDoubleVal:
			return pbwire.Scalars(fl, pbwire.Fixed64, func(u uint64) { t.DoubleVal = append(t.DoubleVal, math.Float64frombits(u)) })
		case fIntVal:
			return pbwire.Scalars(fl, pbwire.Varint, func(u uint64) { t.IntVal = append(t.IntVal, int32(u)) })
		case fStringVal:
			t.StringVal = append(t.StringVal, append([]byte{}, fl.V...))
		case fInt64Val:
			return pbwire.Scalars(fl, pbwire.Varint, func(u uint64) { t.Int64Val = append(t.Int64Val, int64(u)) })
		case fBoolVal:
			return pbwire.Scalars(fl, pbwire.Varint, func(u uint64) { t.BoolVal = append(t.BoolVal, u != 0) })
		case fHalfVal:
			return pbwire.Scalars(fl, pbwire.Varint, func(u uint64) { t.HalfVal = append(t.HalfVal, int32(u)) })
		case fUint32Val:
			return pbwire.Scalars(fl, pbwire.Varint, func(u uint64) { t.Uint32Val = append(t.Uint32Val, uint32(u)) })
		case fUint64Val:
			return pbwire.Scalars(fl, pbwire.Varint, func(u uint64) { t.Uint64Val = append(t.Uint64Val, u) })
		}
		return nil
	})
	return t, err
}

// DecodeModelSpec decodes a ModelSpec.
func DecodeModelSpec(msg []byte) (ModelSpec, error) {
	var s ModelSpec
	err := pbwire.Walk(msg, func(fl *pbwire.Field) error {
		switch fl.Num {
		case 1:
			s.Name = string(fl.V)
		case 2:
			v := int64(0)
			s.Version = &v
			return pbwire.Walk(fl.V, func(x *pbwire.Field) error {
				if x.Num == 1 {
					v = int64(x.U)
					s.Version = &v
				}
				return nil
			})
		case 3:
			s.SignatureName = string(fl.V)
		case 4:
			s.Label = string(fl.V)
		}
		return nil
	})
	return s, err
}

// mapEntry decodes a map<string, message> entry: key=1, value=2.
func mapEntry(msg []byte) (string, []byte, error) {
	var k string
	var v []byte
	err := pbwire.Walk(msg, func(fl *pbwire.Field) error {
		switch fl.Num {
		case 1:
			k = string(fl.V)
		case 2:
			v = fl.V
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
	err := pbwire.Walk(msg, func(fl *pbwire.Field) error {
		switch fl.Num {
		case 1:
			k, v, err := mapEntry(fl.V)
			if err != nil {
				return err
			}
			t, err := DecodeTensorProto(v)
			if err != nil {
				return fmt.Errorf("output %q: %w", k, err)
			}
			r.Outputs[k] = t
		case 2:
			s, err := DecodeModelSpec(fl.V)
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
	err := pbwire.Walk(msg, func(fl *pbwire.Field) error {
		switch fl.Num {
		case 1:
			return pbwire.Walk(fl.V, func(c *pbwire.Field) error {
				if c.Num != 1 {
					return nil
				}
				classes := []Class{}
				err := pbwire.Walk(c.V, func(cl *pbwire.Field) error {
					if cl.Num != 1 {
						return nil
					}
					var x Class
					err := pbwire.Walk(cl.V, func(f *pbwire.Field) error {
						switch f.Num {
						case 1:
							x.Label = string(f.V)
						case 2:
							x.Score = math.Float32frombits(uint32(f.U))
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
			s, err := DecodeModelSpec(fl.V)
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
	err := pbwire.Walk(msg, func(fl *pbwire.Field) error {
		switch fl.Num {
		case 1:
			return pbwire.Walk(fl.V, func(rg *pbwire.Field) error {
				if rg.Num != 1 {
					return nil
				}
				var v float32
				err := pbwire.Walk(rg.V, func(f *pbwire.Field) error {
					if f.Num == 1 {
						v = math.Float32frombits(uint32(f.U))
					}
					return nil
				})
				r.Values = append(r.Values, v)
				return err
			})
		case 2:
			s, err := DecodeModelSpec(fl.V)
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
	err := pbwire.Walk(msg, func(fl *pbwire.Field) error {
		switch fl.Num {
		case 1:
			s, err := DecodeModelSpec(fl.V)
			r.ModelSpec = s
			return err
		case 2:
			k, anyMsg, err := mapEntry(fl.V)
			if err != nil || k != "signature_def" {
				return err
			}
			var value []byte
			if err := pbwire.Walk(anyMsg, func(a *pbwire.Field) error {
				switch a.Num {
				case 1:
					r.TypeURL = string(a.V)
				case 2:
					value = a.V
				}
				return nil
			}); err != nil {
				return err
			}
			return pbwire.Walk(value, func(e *pbwire.Field) error {
				if e.Num != 1 {
					return nil
				}
				name, def, err := mapEntry(e.V)
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
	err := pbwire.Walk(msg, func(fl *pbwire.Field) error {
		switch fl.Num {
		case 1, 2:
			k, v, err := mapEntry(fl.V)
			if err != nil {
				return err
			}
			var ti TensorInfo
			err = pbwire.Walk(v, func(f *pbwire.Field) error {
				switch f.Num {
				case 1:
					ti.Name = string(f.V)
				case 2:
					ti.DType = DType(int32(f.U))
				case 3:
					shape, err := DecodeTensorProto(appendBytes(nil, fShape, f.V))
					ti.Shape = shape.Shape
					return err
				}
				return nil
			})
			if fl.Num == 1 {
				sd.Inputs[k] = ti
			} else {
				sd.Outputs[k] = ti
			}
			return err
		case 3:
			sd.MethodName = string(fl.V)
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
	err := pbwire.Walk(msg, func(fl *pbwire.Field) error {
		if fl.Num != 1 {
			return nil
		}
		var s ModelVersionStatus
		err := pbwire.Walk(fl.V, func(f *pbwire.Field) error {
			switch f.Num {
			case 1:
				s.Version = int64(f.U)
			case 2:
				s.State = int32(f.U)
			case 3:
				return pbwire.Walk(f.V, func(e *pbwire.Field) error {
					switch e.Num {
					case 1:
						s.ErrorCode = int32(e.U)
					case 2:
						s.ErrorMessage = string(e.V)
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
