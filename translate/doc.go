// Package translate is the pure heart of tfsbridge: TensorFlow Serving REST
// JSON in, Open Inference Protocol (v2) bodies out, and back again.
//
// Nothing under translate/ knows about HTTP, gRPC or Envoy: every function
// takes bytes and tensors and returns bytes and tensors, so the ext_proc
// adapter, the reverse proxy and the tests all drive exactly the same code.
//
// Subpackages, one job each:
//   - tensor: the datatype table, tensors held as wire bytes, model signatures;
//   - apierr: the one user-facing error type and its HTTP status mapping;
//   - jsontext: rapidjson-compatible JSON: one push tokenizer, the tape
//     built on it (Parse), the pretty writer and TF's float format;
//   - tfjson: the json_tensor.cc rules the TF parsers and writers share
//     (request format, ParseJson's texts, FormatError, b64 values);
//   - tfrequest: TF Serving predict request parsing (instances / inputs),
//     one decoder for whole bodies and streams;
//   - tfexample: TF Serving classify/regress request parsing into serialized
//     tf.Examples, and which v2 models can answer those verbs;
//   - tfresponse: TF Serving predict, classify, regress, error, status and
//     metadata bodies;
//   - route: the TF Serving URL grammar and the v2 paths built from it;
//   - oip: v2 request encoding (binary extension or JSON) and response decoding;
//   - tfgrpc, oipgrpc, grpcmap: TF Serving's and the v2 gRPC messages on
//     the protobuf wire (over the module's internal/pbwire) and the per-verb
//     translation between them (the session's gRPC pipelines serve it);
//   - tfcompare: two TF answers compared in TF terms (tfsbridge compare).
//
// tfrequest, tfexample and tfresponse import none of one another: what
// they share lives below them (tfjson, jsontext, tensor, apierr).
//
// This package itself holds one Pipeline per inference verb (predict,
// classify, regress), chosen once from the route's verb (For), each with
// its request side (TF body → v2 body, whole or streamed), and its
// response side (v2 response → TF body, whole or streamed): pipeline.go
// ties them together; predict.go, examples.go, request_stream.go,
// response_stream.go and decode.go hold the steps, none calling back
// into another's file. Status and metadata are GET reads with no body to
// translate: tfresponse writes their answers.
package translate
