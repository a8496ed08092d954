// Package mockv2 is a built-in Open Inference Protocol v2 server with sample
// models that answers on the wire like Triton, KServe or MLServer. It backs
// `tfsbridge mock`, `tfsbridge demo` and the end-to-end tests, so it is an
// independent implementation of the protocol: it shares no code with the
// translator (only the datatype table of translate/tensor), and a bug there
// cannot hide itself here.
//
// # Kinds
//
// Options.Kind picks the server imitated (see
// docs/open-inference-protocol.md for the facts it follows):
//
//   - "triton": GET /v2 (extensions include binary_tensor_data),
//     /v2/health/live|ready (empty 200), GET /v2/models/{m}[/versions/{v}]
//     (metadata, batch dim -1 when max_batch_size > 0), .../ready,
//     .../config (protobuf-JSON model config), POST .../infer and
//     POST /v2/repository/index. Content-Type is ignored; a missing
//     Inference-Header-Content-Length means all JSON, 0 a raw binary
//     request; binary_data_size, binary_data_output and per-output
//     binary_data as Triton applies them; the response carries the IHCL
//     header and application/octet-stream only when a binary output is
//     non-empty; JSON floats use rapidjson's format with bare NaN/Infinity;
//     gzip/deflate request bodies and Accept-Encoding responses. Errors
//     carry Triton's texts and codes (JSON type errors 500, argument errors
//     400, unknown model 404, "[request id: …] " on core checks).
//   - "kserve": the Python model server: {"live":true}-style health, model
//     metadata without versions, any /versions/ path 501, GET /v2/models.
//     A JSON Content-Type (or none) is validated like pydantic (422
//     {"detail": [...]}); any other needs inference-header-content-length
//     (lowercase in responses); BYTES inputs must be UTF-8, FP16 and BF16
//     only in binary; JSON responses always carry id and explicit nulls;
//     binary responses have no Content-Type and are chunked.
//   - "mlserver": JSON only (a binary body is a 422), datatype enum errors
//     as pydantic reports them, nulls omitted, NaN as null, 1-D outputs as
//     [N,1], BYTES outputs as str or base64 content types, undecodable data
//     as a plain-text 500.
//
// Unknown paths answer 404 {"error":"Not Found"} (Triton) or
// {"detail":"Not Found"} (FastAPI). Bodies are capped by
// Options.MaxBodyBytes before and after decompression (413 beyond it), and
// nothing is allocated from a declared shape before the bytes that must
// fill it have been counted.
//
// # Models
//
// Models lists them; shapes below are as metadata reports them.
//
//   - half_plus_two: x FP32 [-1] → y = 0.5·x + 2 (TF Serving's example; not
//     batching on Triton, since a batch of scalars needs empty dims there).
//   - simple: Triton's example, INPUT0/INPUT1 INT32 [-1,16] →
//     OUTPUT0 = sum, OUTPUT1 = difference; max_batch_size 8.
//   - bytes_echo: text BYTES [-1] → echo (same) and echo_bytes (each
//     element's bytes reversed, so usually not UTF-8).
//   - half_times_two: x FP16 [-1,4] → y = 2·x; max_batch_size 8.
//   - multi_out: x FP32 [-1,2] → sum FP32 [-1], label_bytes BYTES [-1]
//     ("first"/"second"), argmax INT64 [-1].
//   - mixed_types: flag BOOL, count INT64, value FP64, each [-1,1] →
//     not_flag, count_plus_one, scaled = value·count; max_batch_size 8.
//   - fixed3: x FP32 [3] → reversed [3], total [1]; not batching.
//   - identity_int64: INPUT0 INT64 [-1,-1] → OUTPUT0; max_batch_size 8.
//   - every_dtype: in_<dt> → out_<dt> (identity), [-1], for each datatype
//     of EveryDType (all v2 datatypes but BF16), lower-cased.
//   - identity_bf16: x BF16 [-1] → y (Triton's datatype alone).
//   - FP16OutputModel, FP16InputModel: KServe's own test models
//     (fp32_input → fp16_output + fp32_output; fp16_input + str_input →
//     str_output + fp32_output; outputs flattened).
//   - linear_classifier: inputs BYTES [-1] (serialized tf.Examples, as
//     TF Serving's :classify sends them) → classes BYTES [-1,-1] and scores
//     FP32 [-1,-1]: per example, the labels of its bytes feature "labels"
//     (default negative, positive), scored by its float feature "scores"
//     or else by a softmax over (k − (K−1)/2)·x of its numeric feature "x"
//     (two classes: 1−σ(x), σ(x)).
//   - linear_regressor: inputs BYTES [-1] → outputs FP32 [-1] = w·x + b
//     from the numeric features x (required), w (0.5) and b (2).
//     Both decode the examples with their own protowire reader, and
//     answer 400 {"error": …} for a malformed example or a missing "x".
//   - slow, garbage: the test hooks below (x FP32 [-1] → y = x).
//
// # gRPC
//
// Server.NewGRPCServer serves inference.GRPCInferenceService (ServerLive,
// ServerReady, ServerMetadata, ModelReady, ModelMetadata, ModelInfer) with
// the same models and kind, through a hand-written service description and
// its own protowire reader and writer (grpcwire.go), as docs/grpc.md §4.2
// says each server behaves: Triton answers raw_output_contents always,
// refuses contents beside raw and a missing raw entry; KServe answers raw
// when the request was raw or an output is FP16 and wants one raw entry per
// input; MLServer answers raw when the request was raw, fills inputs
// without data from the raw entries in order and carries FP16 in
// bytes_contents. Lookups and statuses follow each server's gRPC front end
// (Triton's version strings, KServe ignoring versions, MLServer's "Model m
// with version  not found" and its UNKNOWN ModelReady); message caps are
// the servers' (INT32_MAX, 8 MiB, 4 MiB received). Model "garbage" answers
// a message that is not valid protobuf. `tfsbridge mock --grpc-addr`
// serves it.
//
// # Test hooks
//
//   - Model "slow" waits Options.Delay (default DefaultDelay) before
//     answering, or until the client goes away.
//   - Header X-Mock-Delay: <Go duration> (at most MaxHeaderDelay) delays
//     any request before it is handled.
//   - Model "garbage" answers 200 with a malformed body chosen by header
//     X-Mock-Garbage: "truncated" (default: the body is cut inside the
//     binary blocks, or inside the JSON when there are none), "ihcl" (the
//     Inference-Header-Content-Length exceeds the body), "json" (invalid
//     JSON) or "empty" (no body at all).
package mockv2
