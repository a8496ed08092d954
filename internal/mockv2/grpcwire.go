package mockv2

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/internal/pbwire"
)

// The v2 gRPC messages (KServe's grpc_predict_v2.proto, Triton's grpc_service.proto), read
// and written by the mock's own code. Only the generic protobuf wire walk (internal/pbwire)
// is shared with the translator's v2 wire package (translate/oipgrpc): what each field
// number means is the mock's own reading, so a misreading there shows here.

// grpcContents is a decoded InferTensorContents: the typed values of one tensor.
type grpcContents struct {
	set     bool
	bools   []bool
	ints    []int32
	int64s  []int64
	uints   []uint32
	uint64s []uint64
	fp32s   []float32
	fp64s   []float64
	bytes   [][]byte
}

func decodeContents(msg []byte) (grpcContents, error) {
	c := grpcContents{set: true}
	err := pbwire.Walk(msg, func(fl *pbwire.Field) error {
		switch fl.Num {
		case 1:
			return pbwire.Scalars(fl, pbwire.Varint, func(u uint64) { c.bools = append(c.bools, u != 0) })
		case 2:
			return pbwire.Scalars(fl, pbwire.Varint, func(u uint64) { c.ints = append(c.ints, int32(u)) })
		case 3:
			return pbwire.Scalars(fl, pbwire.Varint, func(u uint64) { c.int64s = append(c.int64s, int64(u)) })
		case 4:
			return pbwire.Scalars(fl, pbwire.Varint, func(u uint64) { c.uints = append(c.uints, uint32(u)) })
		case 5:
			return pbwire.Scalars(fl, pbwire.Varint, func(u uint64) { c.uint64s = append(c.uint64s, u) })
		case 6:
			return pbwire.Scalars(fl, pbwire.Fixed32, func(u uint64) { c.fp32s = append(c.fp32s, math.Float32frombits(uint32(u))) })
		case 7:
			return pbwire.Scalars(fl, pbwire.Fixed64, func(u uint64) { c.fp64s = append(c.fp64s, math.Float64frombits(u)) })
		case 8:
			c.bytes = append(c.bytes, fl.V)
		}
		return nil
	})
	return c, err
}

// grpcInput is one ModelInferRequest.InferInputTensor.
type grpcInput struct {
	name, datatype string
	shape          []int64
	contents       grpcContents
}

// grpcInferRequest is a decoded ModelInferRequest.
type grpcInferRequest struct {
	modelName, modelVersion, id string
	inputs                      []grpcInput
	outputs                     []string
	raw                         [][]byte
}

// decodeInferRequest reads model_name=1, model_version=2, id=3, inputs=5 {name=1,
// datatype=2, shape=3, contents=5}, outputs=6 {name=1}, raw_input_contents=7; parameters
// are skipped (the sample models take none).
func decodeInferRequest(msg []byte) (*grpcInferRequest, error) {
	r := &grpcInferRequest{}
	err := pbwire.Walk(msg, func(fl *pbwire.Field) error {
		switch fl.Num {
		case 1:
			r.modelName = string(fl.V)
		case 2:
			r.modelVersion = string(fl.V)
		case 3:
			r.id = string(fl.V)
		case 5:
			var in grpcInput
			err := pbwire.Walk(fl.V, func(f *pbwire.Field) error {
				switch f.Num {
				case 1:
					in.name = string(f.V)
				case 2:
					in.datatype = string(f.V)
				case 3:
					return pbwire.Scalars(f, pbwire.Varint, func(u uint64) { in.shape = append(in.shape, int64(u)) })
				case 5:
					c, err := decodeContents(f.V)
					in.contents = c
					return err
				}
				return nil
			})
			r.inputs = append(r.inputs, in)
			return err
		case 6:
			return pbwire.Walk(fl.V, func(f *pbwire.Field) error {
				if f.Num == 1 {
					r.outputs = append(r.outputs, string(f.V))
				}
				return nil
			})
		case 7:
			r.raw = append(r.raw, fl.V)
		}
		return nil
	})
	return r, err
}

// decodeModelRequest reads {name=1, version=2} (ModelReady, ModelMetadata requests).
func decodeModelRequest(msg []byte) (name, version string, err error) {
	err = pbwire.Walk(msg, func(fl *pbwire.Field) error {
		switch fl.Num {
		case 1:
			name = string(fl.V)
		case 2:
			version = string(fl.V)
		}
		return nil
	})
	return name, version, err
}

// --- writing ---

func pbBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func pbString(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

func pbBool(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
}

func pbPackedVarints(b []byte, num protowire.Number, n int, at func(i int) uint64) []byte {
	if n == 0 {
		return b
	}
	var p []byte
	for i := 0; i < n; i++ {
		p = protowire.AppendVarint(p, at(i))
	}
	return pbBytes(b, num, p)
}

// appendTensorMeta writes {name=1, datatype=2, shape=3} (metadata TensorMetadata and the
// head of an InferOutputTensor share these numbers).
func appendTensorMeta(b []byte, name, datatype string, shape []int64) []byte {
	b = pbString(b, 1, name)
	b = pbString(b, 2, datatype)
	return pbPackedVarints(b, 3, len(shape), func(i int) uint64 { return uint64(shape[i]) })
}

// appendModelMetadata writes a ModelMetadataResponse.
func appendModelMetadata(name string, versions []string, platform string, inputs, outputs []metaTensor) []byte {
	b := pbString(nil, 1, name)
	for _, v := range versions {
		b = pbBytes(b, 2, []byte(v))
	}
	b = pbString(b, 3, platform)
	for _, t := range inputs {
		b = pbBytes(b, 4, appendTensorMeta(nil, t.Name, t.Datatype, t.Shape))
	}
	for _, t := range outputs {
		b = pbBytes(b, 5, appendTensorMeta(nil, t.Name, t.Datatype, t.Shape))
	}
	return b
}

// leBytes returns n little-endian elements of width w from a typed list.
func leBytes(n, w int, at func(i int) uint64) []byte {
	out := make([]byte, n*w)
	for i := 0; i < n; i++ {
		switch w {
		case 1:
			out[i] = byte(at(i))
		case 2:
			binary.LittleEndian.PutUint16(out[2*i:], uint16(at(i)))
		case 4:
			binary.LittleEndian.PutUint32(out[4*i:], uint32(at(i)))
		default:
			binary.LittleEndian.PutUint64(out[8*i:], at(i))
		}
	}
	return out
}
