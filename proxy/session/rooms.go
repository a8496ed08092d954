package session

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
}
