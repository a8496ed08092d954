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
//   - jsontext: a rapidjson-compatible JSON reader and pretty writer;
//   - tfrequest: TF Serving predict request parsing (instances / inputs);
//   - tfexample: TF Serving classify/regress request parsing into serialized
//     tf.Examples, and which v2 models can answer those verbs;
//   - tfresponse: TF Serving predict, classify, regress, error, status and
//     metadata bodies;
//   - route: the TF Serving URL grammar and the v2 paths built from it;
//   - v2: v2 request encoding (binary extension or JSON) and response decoding.
//
// This package itself holds the pipelines the proxy runs per request (TF
// request → v2 body, v2 response → TF body; for predict, and for classify
// and regress) and their benchmarks.
package translate
