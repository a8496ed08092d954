package extproc

import "github.com/tfsbridge/tfsbridge/proxy/session"

// headerRequestID is the request id header (Envoy's x-request-id).
const headerRequestID = "x-request-id"

// withRequestID adds the exchange's request id to what the client will
// see: an immediate response, or the response headers of an exchange the
// session continues (a translated one). Envoy itself returns x-request-id
// only when always_set_request_id_in_response is on, and the session
// makes one up when Envoy sent none.
func withRequestID(a session.Action, sess *session.Session, responseHeaders bool) session.Action {
	id := sess.RequestID()
	if id == "" || !(a.Verdict == session.Respond || (responseHeaders && a.Verdict == session.Continue)) {
		return a
	}
	a.Set = append(a.Set[:len(a.Set):len(a.Set)], session.Header{Key: headerRequestID, Value: id})
	return a
}

// withRequestID is withRequestID for an action whose reply is built at
// once (the buffered loop's): the grown header list is in the stream's
// room instead of an allocation of its own per exchange.
func (st *streamTrace) withRequestID(a session.Action, sess *session.Session, responseHeaders bool) session.Action {
	id := sess.RequestID()
	if id == "" || !(a.Verdict == session.Respond || (responseHeaders && a.Verdict == session.Continue)) {
		return a
	}
	room := st.replyRooms().set[:0]
	if len(a.Set) >= cap(room) {
		return withRequestID(a, sess, responseHeaders)
	}
	a.Set = append(append(room, a.Set...), session.Header{Key: headerRequestID, Value: id})
	return a
}
