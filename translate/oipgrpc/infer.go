package oipgrpc

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Field numbers of ModelInferRequest / ModelInferResponse and their
// tensors (grpc_predict_v2.proto).
const (
	fModelName    protowire.Number = 1
	fModelVersion protowire.Number = 2
	fID           protowire.Number = 3
	fParameters   protowire.Number = 4
	fTensors      protowire.Number = 5 // inputs (request), outputs (response)
	fReqOutputs   protowire.Number = 6 // requested outputs
	fReqRaw       protowire.Number = 7 // raw_input_contents
	fRespRaw      protowire.Number = 6 // raw_output_contents

	fTensorName       protowire.Number = 1
	fTensorDatatype   protowire.Number = 2
	fTensorShape      protowire.Number = 3
	fTensorParameters protowire.Number = 4
	fTensorContents   protowire.Number = 5
	fOutputName       protowire.Number = 1
	fOutputParameters protowire.Number = 2

	fBoolContents   protowire.Number = 1
	fIntContents    protowire.Number = 2
	fInt64Contents  protowire.Number = 3
	fUintContents   protowire.Number = 4
	fUint64Contents protowire.Number = 5
	fFP32Contents   protowire.Number = 6
	fFP64Contents   protowire.Number = 7
	fBytesContents  protowire.Number = 8
)

// Head is the header of an infer request or response: everything but the
// tensors.
type Head struct {
	ModelName    string
	ModelVersion string
	ID           string
}

// Input is one input of a request being written: its metadata, and Size,
// the length of its raw_input_contents entry.
type Input struct {
	Name     string
	DataType tensor.DataType
	Shape    []int64
	Size     int
}

// AppendInferRequest appends a ModelInferRequest: h, inputs, the requested
// outputs (none: all), and one raw_input_contents entry per input, whose
// Size bytes raw(dst, i) appends. The buffer is grown once, to the exact
// size, so the tensor bytes are copied exactly once.
func AppendInferRequest(dst []byte, h Head, inputs []Input, outputs []string, raw func(dst []byte, i int) []byte) []byte {
	total := sizeHead(h)
	for i := range inputs {
		total += sizeBytesField(fTensors, tensorHeadSize(inputs[i].Name, inputs[i].DataType, inputs[i].Shape, 0))
		total += sizeBytesField(fReqRaw, inputs[i].Size)
	}
	for _, o := range outputs {
		total += sizeBytesField(fReqOutputs, sizeOutput(o))
	}
	dst = growExact(dst, total)
	dst = appendHead(dst, h)
	for i := range inputs {
		in := &inputs[i]
		dst = appendLenField(dst, fTensors, tensorHeadSize(in.Name, in.DataType, in.Shape, 0))
		dst = appendTensorHead(dst, in.Name, in.DataType, in.Shape)
	}
	for _, o := range outputs {
		dst = appendLenField(dst, fReqOutputs, sizeOutput(o))
		dst = appendStringField(dst, fOutputName, o)
	}
	for i := range inputs {
		dst = appendLenField(dst, fReqRaw, inputs[i].Size)
		dst = raw(dst, i)
	}
	return dst
}

// AppendInferRequestTensors is AppendInferRequest for tensors held whole
// (classify and regress examples, tests).
func AppendInferRequestTensors(dst []byte, h Head, inputs []tensor.Tensor, outputs []string) []byte {
	ins := make([]Input, len(inputs))
	for i := range inputs {
		t := &inputs[i]
		ins[i] = Input{Name: t.Name, DataType: t.DataType, Shape: t.Shape, Size: RawSize(t)}
	}
	return AppendInferRequest(dst, h, ins, outputs, func(dst []byte, i int) []byte { return AppendRaw(dst, &inputs[i]) })
}

// RawSize is the size of t's raw contents.
func RawSize(t *tensor.Tensor) int {
	if t.DataType != tensor.Bytes {
		return len(t.Data)
	}
	n := 4 * len(t.Strings)
	for _, s := range t.Strings {
		n += len(s)
	}
	return n
}

// AppendRaw appends t's raw contents: its little-endian elements (BOOL
// as 0/1), or for BYTES each element's u32 LE length and bytes.
func AppendRaw(dst []byte, t *tensor.Tensor) []byte {
	switch t.DataType {
	case tensor.Bytes:
		for _, s := range t.Strings {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)))
			dst = append(dst, s...)
		}
		return dst
	case tensor.Bool:
		for _, c := range t.Data {
			if c != 0 {
				c = 1
			}
			dst = append(dst, c)
		}
		return dst
	}
	return append(dst, t.Data...)
}

func sizeHead(h Head) int {
	return sizeStringField(fModelName, h.ModelName) + sizeStringField(fModelVersion, h.ModelVersion) + sizeStringField(fID, h.ID)
}

func appendHead(b []byte, h Head) []byte {
	b = appendStringField(b, fModelName, h.ModelName)
	b = appendStringField(b, fModelVersion, h.ModelVersion)
	return appendStringField(b, fID, h.ID)
}

func sizeOutput(name string) int { return sizeStringField(fOutputName, name) }

// shapeSize is the payload of the packed int64 shape.
func shapeSize(shape []int64) int {
	n := 0
	for _, d := range shape {
		n += protowire.SizeVarint(uint64(d))
	}
	return n
}

// tensorHeadSize is the size of an Infer*Tensor with contents bytes of
// typed contents (0: none).
func tensorHeadSize(name string, dt tensor.DataType, shape []int64, contents int) int {
	n := sizeStringField(fTensorName, name) + sizeStringField(fTensorDatatype, dt.String())
	if len(shape) > 0 {
		n += sizeBytesField(fTensorShape, shapeSize(shape))
	}
	if contents > 0 {
		n += sizeBytesField(fTensorContents, contents)
	}
	return n
}

func appendTensorHead(b []byte, name string, dt tensor.DataType, shape []int64) []byte {
	b = appendStringField(b, fTensorName, name)
	b = appendStringField(b, fTensorDatatype, dt.String())
	if len(shape) > 0 {
		b = appendLenField(b, fTensorShape, shapeSize(shape))
		for _, d := range shape {
			b = protowire.AppendVarint(b, uint64(d))
		}
	}
	return b
}

// AppendInferResponse appends a ModelInferResponse with h and outputs,
// every output's bytes in raw_output_contents as Triton answers (tests
// and the mock server use it).
func AppendInferResponse(dst []byte, h Head, outputs []tensor.Tensor) []byte {
	dst = appendHead(dst, h)
	for i := range outputs {
		t := &outputs[i]
		dst = appendLenField(dst, fTensors, tensorHeadSize(t.Name, t.DataType, t.Shape, 0))
		dst = appendTensorHead(dst, t.Name, t.DataType, t.Shape)
	}
	for i := range outputs {
		dst = appendLenField(dst, fRespRaw, RawSize(&outputs[i]))
		dst = AppendRaw(dst, &outputs[i])
	}
	return dst
}

// AppendInferResponseTyped is AppendInferResponse with the values in the
// typed contents, as KServe and MLServer answer typed requests; FP16 and
// BF16, which have no typed field, go to bytes_contents as MLServer
// writes them (docs/grpc.md §4.2).
func AppendInferResponseTyped(dst []byte, h Head, outputs []tensor.Tensor) []byte {
	dst = appendHead(dst, h)
	for i := range outputs {
		t := &outputs[i]
		c := appendContents(nil, t)
		dst = appendLenField(dst, fTensors, tensorHeadSize(t.Name, t.DataType, t.Shape, len(c)))
		dst = appendTensorHead(dst, t.Name, t.DataType, t.Shape)
		if len(c) > 0 {
			dst = appendLenField(dst, fTensorContents, len(c))
			dst = append(dst, c...)
		}
	}
	return dst
}

// appendContents appends t's values as InferTensorContents fields.
func appendContents(b []byte, t *tensor.Tensor) []byte {
	num := contentsField(t.DataType)
	if t.DataType == tensor.Bytes || num == fBytesContents {
		if t.DataType != tensor.Bytes {
			if len(t.Data) > 0 {
				b = protowire.AppendTag(b, fBytesContents, protowire.BytesType)
				b = protowire.AppendBytes(b, t.Data)
			}
			return b
		}
		for _, s := range t.Strings {
			b = protowire.AppendTag(b, fBytesContents, protowire.BytesType)
			b = protowire.AppendBytes(b, s)
		}
		return b
	}
	n := t.Len()
	if n == 0 {
		return b
	}
	var packed []byte
	for i := range n {
		switch t.DataType {
		case tensor.FP32:
			packed = binary.LittleEndian.AppendUint32(packed, binary.LittleEndian.Uint32(t.Data[4*i:]))
		case tensor.FP64:
			packed = binary.LittleEndian.AppendUint64(packed, binary.LittleEndian.Uint64(t.Data[8*i:]))
		default:
			packed = protowire.AppendVarint(packed, uint64(t.Int64At(i)))
		}
	}
	b = appendLenField(b, num, len(packed))
	return append(b, packed...)
}

// contentsField is the InferTensorContents field of dt (bytes_contents
// for FP16 and BF16, which have none).
func contentsField(dt tensor.DataType) protowire.Number {
	switch dt {
	case tensor.Bool:
		return fBoolContents
	case tensor.Int8, tensor.Int16, tensor.Int32:
		return fIntContents
	case tensor.Int64:
		return fInt64Contents
	case tensor.Uint8, tensor.Uint16, tensor.Uint32:
		return fUintContents
	case tensor.Uint64:
		return fUint64Contents
	case tensor.FP32:
		return fFP32Contents
	case tensor.FP64:
		return fFP64Contents
	}
	return fBytesContents
}
