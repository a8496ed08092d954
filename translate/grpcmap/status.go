package grpcmap

import (
	"strconv"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// gRPC status codes (the absl codes, numbered alike).
const (
	codeOK                 = 0
	codeCancelled          = 1
	codeUnknown            = 2
	codeInvalidArgument    = 3
	codeNotFound           = 5
	codeResourceExhausted  = 8
	codeFailedPrecondition = 9
	codeUnimplemented      = 12
	codeInternal           = 13
	codeUnavailable        = 14
	codeUnauthenticated    = 16
)

// maxMessage is the longest status message TF Serving sends; longer ones
// are cut and marked (model_servers/grpc_status_util.cc).
const maxMessage = 1024

// Status is the gRPC status and message TF Serving would send for err:
// its code (tfsbridge's own BadGateway is INTERNAL, PayloadTooLarge
// RESOURCE_EXHAUSTED, as gRPC itself answers a message over its limit)
// and its message, cut at 1024 bytes + "...TRUNCATED". nil is OK.
func Status(err error) (code int, message string) {
	if err == nil {
		return codeOK, ""
	}
	e := apierr.As(err)
	code = int(e.Code)
	switch {
	case e.Code == apierr.BadGateway:
		code = codeInternal
	case e.Code == apierr.PayloadTooLarge:
		code = codeResourceExhausted
	case code < codeOK || code > codeUnauthenticated:
		code = codeUnknown
	}
	message = e.Msg
	if len(message) > maxMessage {
		message = message[:maxMessage] + "...TRUNCATED"
	}
	return code, message
}

// Unimplemented is the answer to MultiInference and
// HandleReloadConfigRequest, which v2 servers cannot serve.
func Unimplemented(m Method) error {
	return apierr.Errorf(apierr.Unimplemented, "%s is not supported: tfsbridge translates to a v2 inference server, which has no equivalent", m)
}

// BackendError turns the gRPC status a v2 server answered ex's call with
// into TF Serving's (docs/grpc.md §6.5): a model or version the server does not
// know, or one not ready (Triton's and KServe's UNAVAILABLE, MLServer's
// INVALID_ARGUMENT: its ModelNotReady is an HTTP 400; MLServer's
// ModelReady, which has no error handler, lets grpcio answer an unknown
// model UNKNOWN naming mlserver.errors.ModelNotFound), is TF's NOT_FOUND
// for the servable (for GetModelStatus its own texts); MLServer's FAILED_PRECONDITION (HTTP
// 422, its validation error) is INVALID_ARGUMENT; every other code goes
// through with the server's text (shape errors, model failures, resource
// limits, deadlines, cancellation, unavailability).
func BackendError(code int, message string, ex *Exchange) error {
	switch {
	case code == codeNotFound, code == codeUnavailable && notReady(message),
		code == codeInvalidArgument && mlserverNotReady(message),
		code == codeUnknown && strings.Contains(message, "mlserver.errors.ModelNotFound"):
		return notFoundFor(ex)
	case code == codeFailedPrecondition:
		return apierr.New(apierr.InvalidArgument, message)
	case code == codeOK, code < 0, code > codeUnauthenticated:
		// A server that fails with OK, or a code gRPC does not define,
		// broke the protocol.
		return apierr.New(apierr.Unknown, message)
	}
	return apierr.New(apierr.Code(code), message)
}

// notReady reports a v2 UNAVAILABLE that means "that model (version) is
// not loaded" rather than "the server is down": Triton's "... is not at
// ready state", KServe's "Model with name m is not ready.".
func notReady(message string) bool {
	return strings.Contains(message, "not at ready state") || strings.Contains(message, "is not ready")
}

// mlserverNotReady reports MLServer's ModelNotReady, which its gRPC
// servicer answers INVALID_ARGUMENT (the error's HTTP 400): "Model m is
// not ready yet." or, since gRPC passes the version as "" rather than
// None, "Model m with version  is not ready yet." (mlserver/errors.py).
// Both ends of the text are matched: a model's own INVALID_ARGUMENT
// message that merely mentions readiness stays what it is.
func mlserverNotReady(message string) bool {
	return strings.HasPrefix(message, "Model ") && strings.HasSuffix(message, " is not ready yet.")
}

// notFoundFor is TF's not-found answer for ex's method.
func notFoundFor(ex *Exchange) error {
	if ex.Method == GetModelStatus {
		if ex.Route.HasVersion {
			return apierr.New(apierr.NotFound, "Could not find version "+strconv.FormatInt(ex.Route.Version, 10)+" of model "+ex.Route.Model)
		}
		return apierr.New(apierr.NotFound, "Could not find any versions of model "+ex.Route.Model)
	}
	return notFound(ex.Route)
}
