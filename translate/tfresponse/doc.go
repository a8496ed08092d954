// Package tfresponse writes the response bodies a TensorFlow Serving REST
// client expects, byte for byte: predict results ({"predictions"} for row
// requests, {"outputs"} for columnar ones), classify and regress results
// ({"results"}) and error bodies in rapidjson's
// pretty layout (docs/tfserving-rest.md §5, §1.6), and model status and metadata bodies in
// protobuf's JSON layout (docs/tfserving-rest.md §2.1, §2.2).
//
// Two JSON styles coexist because TF Serving uses two printers: rapidjson
// for everything json_tensor.cc writes (4-space indent, no trailing
// newline) and protobuf's MessageToJsonString for GET bodies (1-space
// indent, trailing newline, different string escaping).
package tfresponse
