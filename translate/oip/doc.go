// Package oip is tfsbridge's Open Inference Protocol (v2) wire layer: it
// encodes tensors as v2 infer request bodies, decodes v2 infer responses
// back into tensors, and reads the v2 metadata, Triton config and error
// bodies the proxy needs around them.
//
// The three v2 servers differ on the wire (docs/open-inference-protocol.md
// §12), and the differences live here and nowhere else:
//   - Triton and KServe get the Binary Tensor Data Extension: a small JSON
//     header followed by raw little-endian blocks, outputs requested binary
//     with binary_data_output and no "outputs" list;
//   - MLServer has no binary extension, so it gets JSON-only bodies;
//   - responses are decoded the same way for all three: binary blocks when
//     an output says binary_data_size, JSON "data" otherwise (flat, nested
//     or scalar, null and NaN tokens, 64-bit integers exact).
//
// Every error a client can see is an *apierr.Error: 400 for inputs a server
// cannot take, 502 (apierr.BadGateway) for responses that cannot be
// translated.
package oip
