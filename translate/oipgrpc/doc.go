// Package oipgrpc reads and writes the Open Inference Protocol's gRPC
// messages (inference.GRPCInferenceService: ModelInfer, ModelMetadata,
// ModelReady; field numbers of KServe's grpc_predict_v2.proto and Triton's
// grpc_service.proto, docs/grpc.md §4) on the protobuf wire.
//
// As translate/tfgrpc, it is hand-written protowire rather than generated
// code so that tensor bytes are never copied more than once: a request's
// raw_input_contents are written straight from the TF message's
// tensor_content into a buffer sized in advance, and a response's
// raw_output_contents are decoded as sub-slices of the received message.
//
// Requests always carry raw_input_contents, one entry per input
// (all-or-nothing in the protocol; FP16 and BF16 exist only raw; BYTES is
// each element's 4-byte little-endian length then its bytes). Responses
// are read from raw_output_contents when there is one entry per output,
// else from the typed contents, which KServe and MLServer send to typed
// requests.
package oipgrpc
