// Package tfgrpc reads and writes TensorFlow Serving's gRPC messages
// (tensorflow.serving.PredictionService and ModelService, field numbers of
// tensorflow_serving/apis/*.proto and tensorflow/core/framework/*.proto,
// field numbers in docs/grpc.md §2.2) straight on the protobuf wire.
//
// Why hand-written protowire instead of generated types: a PredictRequest
// of one 1x224x224x3 image is 600 KB of tensor_content, and the only work
// the proxy has to do with it is to move it into a ModelInferRequest's
// raw_input_contents. A generated Unmarshal copies tensor_content into a
// fresh []byte, and the v2 Marshal copies it again; here the decoder keeps
// sub-slices of the received message (TensorProto.Content aliases it) and
// the encoder copies each byte exactly once, into a buffer sized in
// advance. The same reasoning holds for typed fields (float_val packed is
// already little-endian float32: one copy), and it keeps the module free
// of generated code for protos it does not own.
//
// Reading follows TF's own rules (Tensor::FromProto, docs/grpc.md §3.4): a
// non-empty tensor_content wins and must have the exact size; otherwise
// the dtype's typed field is read with zero fill, repeat-last broadcast
// and truncation; narrow integers keep their low bits. Writing follows
// Tensor::AsProtoField (TF Serving's default: every value in the typed
// field) or AsProtoTensorContent (--enable_serialization_as_tensor_content).
//
// Parsing is strict about the wire (a truncated or malformed message is
// ErrMalformed, as protobuf's own parser would refuse it) and lenient about
// content, exactly as proto3: unknown fields are skipped, a known field
// with an unexpected wire type is an unknown field, the last occurrence of
// a scalar wins, repeated occurrences of a message merge.
package tfgrpc
