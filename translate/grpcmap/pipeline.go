package grpcmap

import "github.com/tfsbridge/tfsbridge/translate/tfexample"

// Request runs the request step of method m: TF message in, v2 message
// out (appended to dst, which may already hold, say, the 5-byte gRPC
// message prefix), with the Exchange its response step needs; the v2
// method to call is Exchange.V2Path. MultiInference and
// HandleReloadConfigRequest fail UNIMPLEMENTED.
//
// A transport runs one exchange as:
//
//	m, ok := ParseMethod(path)          // else UNIMPLEMENTED, as gRPC answers
//	v2, ex, err := Request(nil, m, msg, resolve, opt)
//	// err: answer Status(err); else call ex.V2Path with v2, then
//	// an error status (code, text): answer Status(BackendError(code, text, ex));
//	// a message: tf, err := Response(nil, answer, ex, opt)
func Request(dst []byte, m Method, msg []byte, resolve Resolver, opt Options) ([]byte, *Exchange, error) {
	switch m {
	case Predict:
		return PredictRequest(dst, msg, resolve, opt)
	case Classify:
		return ExamplesRequest(dst, msg, tfexample.Classify, resolve, opt)
	case Regress:
		return ExamplesRequest(dst, msg, tfexample.Regress, resolve, opt)
	case GetModelMetadata:
		return MetadataRequest(dst, msg, resolve, opt)
	case GetModelStatus:
		return StatusRequest(dst, msg, resolve, opt)
	}
	return nil, nil, Unimplemented(m)
}

// Response runs the response step of ex's method: the v2 answer in, the
// TF answer out, appended to dst.
func Response(dst, msg []byte, ex *Exchange, opt Options) ([]byte, error) {
	switch ex.Method {
	case Predict:
		return PredictResponse(dst, msg, ex, opt)
	case Classify, Regress:
		return ExamplesResponse(dst, msg, ex, opt)
	case GetModelMetadata:
		return MetadataResponse(dst, msg, ex, opt)
	case GetModelStatus:
		return StatusResponse(dst, msg, ex, opt)
	}
	return nil, Unimplemented(ex.Method)
}
