// Package grpcmap is the per-verb translation between TF Serving's gRPC API
// (tensorflow.serving.PredictionService and ModelService) and the Open
// Inference Protocol's gRPC service (inference.GRPCInferenceService), as
// docs/grpc.md §6 maps them: bytes of one gRPC message in,
// bytes of one gRPC message out, and for a failure an *apierr.Error whose
// Code is the gRPC status code TF Serving would send (Status gives the
// code and the message as TF Serving cuts it).
//
// Each verb is two pure steps the transport calls around its upstream
// call: XxxRequest(TF message) → (v2 message, Exchange), then
// XxxResponse(v2 message, Exchange) → TF message; a v2 error status goes
// through BackendError instead. Request and Response dispatch on the
// Method (ParseMethod reads it from the gRPC path), so a transport needs
// nothing else: see Request for the whole exchange. The transport (ext_proc over HTTP/2, or
// the proxy's gRPC listener) handles framing, compression, deadlines and
// metadata; nothing here knows about gRPC the library.
//
// Method     TF request                  v2 call        TF answer
// Predict    PredictRequest              ModelInfer     PredictResponse
// Classify   ClassificationRequest       ModelInfer     ClassificationResponse
// Regress    RegressionRequest           ModelInfer     RegressionResponse
// Metadata   GetModelMetadataRequest     ModelMetadata  GetModelMetadataResponse
// Status     GetModelStatusRequest       ModelReady (with a version) or ModelMetadata
// MultiInference, HandleReloadConfigRequest: UNIMPLEMENTED (Unimplemented).
//
// The wire work is translate/tfgrpc and translate/oipgrpc; the tensor
// layer (translate/tensor) and the classify/regress checks
// (translate/tfexample, translate/tfresponse) are the REST pipeline's own.
package grpcmap
