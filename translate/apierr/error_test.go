package apierr

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestHTTPStatus(t *testing.T) {
	// TF Serving's http_server.cc mapping (docs/tfserving-rest.md §1.5), plus our own two.
	want := map[Code]int{
		OK: 200, Cancelled: 499, Unknown: 500, InvalidArgument: 400, DeadlineExceeded: 504,
		NotFound: 404, AlreadyExists: 409, PermissionDenied: 403, ResourceExhausted: 429,
		FailedPrecondition: 400, Aborted: 409, OutOfRange: 400, Unimplemented: 501,
		Internal: 500, Unavailable: 503, DataLoss: 500, Unauthenticated: 401,
		BadGateway: 502, PayloadTooLarge: 413, Code(77): 500,
	}
	for code, status := range want {
		if got := code.HTTPStatus(); got != status {
			t.Errorf("%v.HTTPStatus() = %d, want %d", code, got, status)
		}
	}
}

func TestFromHTTPStatusRoundTrips(t *testing.T) {
	// Every status a v2 server sends that has a TF code keeps its status.
	for _, status := range []int{200, 400, 401, 403, 404, 409, 413, 429, 499, 501, 502, 503, 504, 500} {
		if got := FromHTTPStatus(status).HTTPStatus(); got != status {
			t.Errorf("FromHTTPStatus(%d).HTTPStatus() = %d", status, got)
		}
	}
	// Regression: a 304 or 999 from the v2 server became a 500; it is
	// the server breaking the protocol, a 502.
	for status, want := range map[int]int{422: 400, 418: 400, 505: 500, 599: 500, 100: 502, 204: 502, 304: 502, 307: 502, 600: 502, 999: 502} {
		if got := FromHTTPStatus(status).HTTPStatus(); got != want {
			t.Errorf("FromHTTPStatus(%d) → %d, want %d", status, got, want)
		}
	}
}

func TestErrorText(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{New(NotFound, "Servable not found for request: Latest(m)"), "NOT_FOUND: Servable not found for request: Latest(m)"},
		{InvalidArgumentf("bad %d", 1), "INVALID_ARGUMENT: bad 1"},
		{Wrap(BadGateway, io.ErrUnexpectedEOF, "truncated"), "BAD_GATEWAY: truncated: unexpected EOF"},
		{Errorf(Code(99), "x"), "CODE(99): x"},
		// A message that already quotes its cause names it once.
		{Wrap(InvalidArgument, errors.New("Invalid value. at offset: 19"), "JSON Parse error: Invalid value. at offset: 19"),
			"INVALID_ARGUMENT: JSON Parse error: Invalid value. at offset: 19"},
		{As(errors.New("boom")), "INTERNAL: boom"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestAs(t *testing.T) {
	inner := New(Unavailable, "backend down")
	wrapped := fmt.Errorf("fetching metadata: %w", inner)
	if got := As(wrapped); got != inner {
		t.Errorf("As(wrapped) = %v, want the inner *Error", got)
	}
	plain := errors.New("boom")
	got := As(plain)
	if got.Code != Internal || got.Msg != "boom" || !errors.Is(got, plain) {
		t.Errorf("As(plain) = %+v, want Internal keeping the cause", got)
	}
	if As(nil) != nil {
		t.Error("As(nil) != nil")
	}
	if !errors.Is(Wrap(Internal, io.EOF, "x"), io.EOF) {
		t.Error("Wrap does not keep its cause for errors.Is")
	}
}
