package extproc

import (
	"sync"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// replyRooms is where a stream builds its replies: one headers or body
// reply and one streamed_response chunk, reused for every message of the
// stream instead of allocated per reply (a reply with its header
// mutation's room is 1.4 KB, four of them were 60% of what a small
// exchange allocated).
//
// A reply may be reused once it is sent: grpc-go encodes a message in
// SendMsg, before it returns, and keeps only the encoded bytes (a body
// mutation sent in parts keeps the parts, not the reply: bodyCodec). A
// stream sends each reply before it builds the next (the buffered loop
// answers one message at a time; the full-duplex loop and its Sink send
// from one goroutine, each reply as soon as it is built), so one room of
// each kind is enough.
type replyRooms struct {
	r     reply
	chunk chunkReply
	// set holds the header list of an action the stream's request id
	// was added to (streamTrace.withRequestID) until its reply is built.
	set [4]session.Header
	// answer holds a small translated answer (responseParts) while its
	// reply is sent; it keeps its capacity in the pool.
	answer []byte
}

// roomPool keeps the rooms of ended streams: a stream is one exchange,
// so a room per stream would still be an allocation per exchange.
var roomPool = sync.Pool{New: func() any { return new(replyRooms) }}

// replyRooms returns the stream's rooms, taken from the pool on first
// use; freeRooms gives them back.
func (st *streamTrace) replyRooms() *replyRooms {
	if st.rooms == nil {
		st.rooms = roomPool.Get().(*replyRooms)
	}
	return st.rooms
}

// freeRooms gives the stream's rooms back once it sends no more replies,
// emptied: a pooled room must not keep a body alive.
func (st *streamTrace) freeRooms() {
	if st.rooms != nil {
		answer := st.rooms.answer[:0]
		*st.rooms = replyRooms{answer: answer}
		roomPool.Put(st.rooms)
		st.rooms = nil
	}
}

// reply returns the stream's reply room, emptied.
func (st *streamTrace) reply() *reply {
	r := &st.replyRooms().r
	*r = reply{}
	return r
}

// headersReply answers a headers message in the stream's room.
func (st *streamTrace) headersReply(a session.Action, request bool) *extprocv3.ProcessingResponse {
	if a.Verdict == session.Respond {
		return immediate(a)
	}
	return st.reply().headers(a, request)
}

// bodyReply answers a body message in the stream's room.
func (st *streamTrace) bodyReply(a session.Action, request bool) *extprocv3.ProcessingResponse {
	if a.Verdict == session.Respond {
		return immediate(a)
	}
	return st.reply().body(a, request)
}

// streamedReply is streamedReply in the stream's chunk room.
func (st *streamTrace) streamedReply(p []byte, end, request bool) *extprocv3.ProcessingResponse {
	r := &st.replyRooms().chunk
	*r = chunkReply{}
	return r.build(p, end, request)
}

// answerRoom returns the stream's answer room, empty, with room for n
// bytes (n ≤ smallAnswer).
func (st *streamTrace) answerRoom(n int) []byte {
	rooms := st.replyRooms()
	if cap(rooms.answer) < n {
		rooms.answer = make([]byte, 0, smallAnswer)
	}
	return rooms.answer[:0]
}
