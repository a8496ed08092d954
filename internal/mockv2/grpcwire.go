package mockv2

import (
	"encoding/binary"
	"errors"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The v2 gRPC messages (KServe's grpc_predict_v2.proto, Triton's grpc_service.proto), read
// and written with protowire by the mock's own code: it shares nothing with the
// translator's v2 wire package (translate/oipgrpc), so a misreading there shows here.

var errWire = errors.New("malformed protobuf message")

// pbField is one field occurrence: v for length-delimited fields, u for the others.
type pbField struct {
	num protowire.Number
	typ protowire.Type
	v   []byte
	u   uint64
}

// pbWalk calls f for every field of msg in wire order.
func pbWalk(msg []byte, f func(fl pbField) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return errWire
		}
		msg = msg[n:]
		fl := pbField{num: num, typ: typ}
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
			return errWire
		}
		msg = msg[n:]
		if err := f(fl); err != nil {
			return err
		}
	}
	return nil
}

// pbScalars reads a repeated scalar occurrence, packed or not, of width w (0 varint, 4
// fixed32, 8 fixed64).
func pbScalars(fl pbField, w int, add func(u uint64)) error {
	if fl.typ != protowire.BytesType {
		add(fl.u)
		return nil
	}
	for p := fl.v; len(p) > 0; {
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
			return errWire
		}
		add(u)
		p = p[n:]
	}
	return nil
}

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
	err := pbWalk(msg, func(fl pbField) error {
		switch fl.num {
		case 1:
			return pbScalars(fl, 0, func(u uint64) { c.bools = append(c.bools, u != 0) })
		case 2:
			return pbScalars(fl, 0, func(u uint64) { c.ints = append(c.ints, int32(u)) })
		case 3:
			return pbScalars(fl, 0, func(u uint64) { c.int64s = append(c.int64s, int64(u)) })
		case 4:
			return pbScalars(fl, 0, func(u uint64) { c.uints = append(c.uints, uint32(u)) })
		case 5:
			return pbScalars(fl, 0, func(u uint64) { c.uint64s = append(c.uint64s, u) })
		case 6:
			return pbScalars(fl, 4, func(u uint64) { c.fp32s = append(c.fp32s, math.Float32frombits(uint32(u))) })
		case 7:
			return pbScalars(fl, 8, func(u uint64) { c.fp64s = append(c.fp64s, math.Float64frombits(u)) })
		case 8:
			c.bytes = append(c.bytes, fl.v)
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
	err := pbWalk(msg, func(fl pbField) error {
		switch fl.num {
		case 1:
			r.modelName = string(fl.v)
		case 2:
			r.modelVersion = string(fl.v)
		case 3:
			r.id = string(fl.v)
		case 5:
			var in grpcInput
			err := pbWalk(fl.v, func(f pbField) error {
				switch f.num {
				case 1:
					in.name = string(f.v)
				case 2:
					in.datatype = string(f.v)
				case 3:
					return pbScalars(f, 0, func(u uint64) { in.shape = append(in.shape, int64(u)) })
				case 5:
					c, err := decodeContents(f.v)
					in.contents = c
					return err
				}
				return nil
			})
			r.inputs = append(r.inputs, in)
			return err
		case 6:
			return pbWalk(fl.v, func(f pbField) error {
				if f.num == 1 {
					r.outputs = append(r.outputs, string(f.v))
				}
				return nil
			})
		case 7:
			r.raw = append(r.raw, fl.v)
		}
		return nil
	})
	return r, err
}

// decodeModelRequest reads {name=1, version=2} (ModelReady, ModelMetadata requests).
func decodeModelRequest(msg []byte) (name, version string, err error) {
	err = pbWalk(msg, func(fl pbField) error {
		switch fl.num {
		case 1:
			name = string(fl.v)
		case 2:
			version = string(fl.v)
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
