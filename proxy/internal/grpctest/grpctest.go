// Package grpctest builds TF Serving gRPC messages as
// tensorflow-serving-api clients put them on the wire, for the tests of
// the transports (session, ext_proc, proxy).
package grpctest

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// F32Content is make_tensor_proto(np.array([1, 2], np.float32)): dtype
// DT_FLOAT, shape [2], tensor_content (docs/grpc.md §7).
var F32Content = []byte{0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x02, 0x22, 0x08, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}

// PredictPath is PredictionService/Predict's gRPC path.
const PredictPath = "/tensorflow.serving.PredictionService/Predict"

// Frame is msg as one uncompressed length-prefixed gRPC message.
func Frame(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// Unframe returns the message of a one-message body, nil when b is not
// exactly one uncompressed message.
func Unframe(b []byte) []byte {
	if len(b) < 5 || b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5 {
		return nil
	}
	return b[5:]
}

// Spec appends field 1 (model_spec) of a TF request.
func Spec(b []byte, s tfgrpc.ModelSpec) []byte {
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	return protowire.AppendBytes(b, tfgrpc.AppendModelSpec(nil, s))
}

// Predict is a PredictRequest with one input, alias → TensorProto tp.
func Predict(s tfgrpc.ModelSpec, alias string, tp []byte) []byte {
	b := Spec(nil, s)
	var entry []byte
	entry = protowire.AppendTag(entry, 1, protowire.BytesType)
	entry = protowire.AppendString(entry, alias)
	entry = protowire.AppendTag(entry, 2, protowire.BytesType)
	entry = protowire.AppendBytes(entry, tp)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendBytes(b, entry)
}

// Metadata is a GetModelMetadataRequest asking for signature_def.
func Metadata(s tfgrpc.ModelSpec) []byte {
	b := Spec(nil, s)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendString(b, "signature_def")
}
