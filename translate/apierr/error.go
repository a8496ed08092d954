// Package apierr holds tfsbridge's one user-facing error type: a TF Serving
// status code plus the exact message TF Serving would put in
// {"error": "..."}, and the single place where codes become HTTP statuses.
package apierr

import (
	"errors"
	"fmt"
	"strings"
)

// Code is a TensorFlow / absl status code, plus BadGateway for failures of
// the v2 server that TF Serving itself could never report.
type Code int

// The codes, numbered as absl::StatusCode so they print and compare the
// same way TF Serving's do.
const (
	OK                 Code = 0
	Cancelled          Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	OutOfRange         Code = 11
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
	// BadGateway is tfsbridge's own: the v2 server answered something that
	// cannot be translated (garbage, a truncated binary block). HTTP 502.
	BadGateway Code = 1000
	// PayloadTooLarge is tfsbridge's own: a body over the configured
	// limit. TF Serving has no limit and so no code for it; 413 is what
	// Envoy's own buffer limit answers, so clients see one status for
	// "too large" whichever layer refused. HTTP 413.
	PayloadTooLarge Code = 1001
)

var names = map[Code]string{
	OK: "OK", Cancelled: "CANCELLED", Unknown: "UNKNOWN", InvalidArgument: "INVALID_ARGUMENT",
	DeadlineExceeded: "DEADLINE_EXCEEDED", NotFound: "NOT_FOUND", AlreadyExists: "ALREADY_EXISTS",
	PermissionDenied: "PERMISSION_DENIED", ResourceExhausted: "RESOURCE_EXHAUSTED",
	FailedPrecondition: "FAILED_PRECONDITION", Aborted: "ABORTED", OutOfRange: "OUT_OF_RANGE",
	Unimplemented: "UNIMPLEMENTED", Internal: "INTERNAL", Unavailable: "UNAVAILABLE",
	DataLoss: "DATA_LOSS", Unauthenticated: "UNAUTHENTICATED", BadGateway: "BAD_GATEWAY",
	PayloadTooLarge: "PAYLOAD_TOO_LARGE",
}

// String returns the code's TF name ("INVALID_ARGUMENT"), as TF Serving
// embeds it in nested messages.
func (c Code) String() string {
	if n, ok := names[c]; ok {
		return n
	}
	return fmt.Sprintf("CODE(%d)", int(c))
}

// HTTPStatus maps a code to TF Serving's HTTP status (http_server.cc). This
// is the only place in tfsbridge where that mapping is written down.
func (c Code) HTTPStatus() int {
	switch c {
	case OK:
		return 200
	case Cancelled:
		return 499
	case InvalidArgument, FailedPrecondition, OutOfRange:
		return 400
	case DeadlineExceeded:
		return 504
	case NotFound:
		return 404
	case AlreadyExists, Aborted:
		return 409
	case PermissionDenied:
		return 403
	case ResourceExhausted:
		return 429
	case Unimplemented:
		return 501
	case Unavailable:
		return 503
	case Unauthenticated:
		return 401
	case BadGateway:
		return 502
	case PayloadTooLarge:
		return 413
	}
	return 500
}

// FromHTTPStatus picks the code whose HTTP status best matches a v2
// server's status, so a backend 404 stays a 404 for the TF client. A
// status that is no answer to an inference or metadata call at all (1xx,
// a 2xx other than 200, 3xx, or beyond 599) is BadGateway: the server
// broke the protocol.
func FromHTTPStatus(status int) Code {
	switch status {
	case 200:
		return OK
	case 400, 422:
		return InvalidArgument
	case 401:
		return Unauthenticated
	case 403:
		return PermissionDenied
	case 404:
		return NotFound
	case 409:
		return Aborted
	case 413:
		return PayloadTooLarge
	case 429:
		return ResourceExhausted
	case 499:
		return Cancelled
	case 501:
		return Unimplemented
	case 502:
		return BadGateway
	case 503:
		return Unavailable
	case 504:
		return DeadlineExceeded
	}
	switch {
	case status >= 400 && status < 500:
		return InvalidArgument
	case status < 400 || status > 599:
		return BadGateway
	}
	return Internal
}

// Error is a user-facing failure: Msg is exactly the text TF Serving would
// put in {"error": Msg}. Err, when set, is the underlying cause kept for
// logs and errors.Is; it is never shown to the client.
type Error struct {
	Code Code
	Msg  string
	Err  error
}

// Error implements error.
// The cause is left out when the message already quotes it (TF's
// "JSON Parse error: <the reader's error>", or As of a plain error), so a
// log line carries each text once.
func (e *Error) Error() string {
	if e.Err != nil {
		if cause := e.Err.Error(); !strings.Contains(e.Msg, cause) {
			return e.Code.String() + ": " + e.Msg + ": " + cause
		}
	}
	return e.Code.String() + ": " + e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// HTTPStatus returns the HTTP status for the error's code.
func (e *Error) HTTPStatus() int { return e.Code.HTTPStatus() }

// New returns an Error with a fixed message.
func New(code Code, msg string) *Error { return &Error{Code: code, Msg: msg} }

// Errorf returns an Error with a formatted message. %w is not special here:
// use Wrap to keep a cause.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an Error with the given message that keeps cause for logs.
func Wrap(code Code, cause error, msg string) *Error {
	return &Error{Code: code, Msg: msg, Err: cause}
}

// InvalidArgumentf is the common case: a 400 with TF's message.
func InvalidArgumentf(format string, args ...any) *Error {
	return Errorf(InvalidArgument, format, args...)
}

// As extracts an *Error from err. Any other error becomes an Internal error
// whose message is err's text, so nothing reaches a client unmapped.
func As(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: Internal, Msg: err.Error(), Err: err}
}
