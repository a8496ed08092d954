package session

import (
	"strconv"
	"unsafe"
)

// actionRooms are the session's room for the header lists of the body
// events' actions, as headersSet is the request headers': an exchange
// translates each body once, and the adapters read each action before
// the session's next event of the same body (a full-duplex stream that
// holds a headers action merges it with Then, which copies), so the
// lists need no allocation of their own.
type actionRooms struct {
	// requestSet: the translated request's headers (requestAction:
	// content-type, content-length, accept-encoding, its
	// inference-header-content-length, a model map's routing).
	requestSet [6]Header
	// responseSet and responseRemove: the translated answer's
	// (translateResponse, streamedResponseHeaders).
	responseSet    [2]Header
	responseRemove [3]string
	// answer is ResponseParts' Sink.
	answer answerSink
	// digits holds the text of the lengths the actions set (itoa),
	// written once each, in digitsRoom while it lasts.
	digits     []byte
	digitsRoom [32]byte
}

// itoa is strconv.Itoa without an allocation per number: the text is
// appended to the session's digits and never written over, so the string
// stays valid for as long as anything holds it.
func (r *actionRooms) itoa(n int) string {
	if r.digits == nil {
		r.digits = r.digitsRoom[:0]
	}
	start := len(r.digits)
	r.digits = strconv.AppendInt(r.digits, int64(n), 10)
	return unsafe.String(&r.digits[start], len(r.digits)-start)
}
