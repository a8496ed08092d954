package session

import (
	"sync"

	"github.com/tfsbridge/tfsbridge/proxy/shadow"
)

// teeRoom is where a shadow tee makes its copy: the shadow.Copy handed
// to the engine, its Sent, and the buffers the request, the answers and
// a pooled request's bytes are kept in. Rooms are pooled: a sampled
// exchange takes one (shadowed) and the engine gives it back through
// the copy's Recycle once nothing reads the copy any more, or the tee
// does when the copy is dropped or abandoned before it is handed over.
// A room is never given back while its copy may still be read: the
// engine does not call Recycle then (shadow.Copy.Recycle), and the
// collector frees the room instead.
type teeRoom struct {
	c    shadow.Copy
	sent shadow.Sent
	// one is a Sent.Body of one part (a whole body's translation, or
	// the copy of a pooled request).
	one [1][]byte
	// The buffers, empty between copies, their capacity kept up to
	// maxRoomBuffer.
	req, ans, v2ans, pooled []byte
	// free is recycle bound once, for Copy.Recycle (a method value made
	// per copy would be allocated).
	free func()
}

var teeRooms = sync.Pool{New: func() any { return new(teeRoom) }}

// newTeeRoom returns an empty room.
func newTeeRoom() *teeRoom {
	r := teeRooms.Get().(*teeRoom)
	if r.free == nil {
		r.free = r.recycle
	}
	return r
}

// maxRoomBuffer is the largest buffer a room keeps for its next copy: a
// larger body's buffer goes with its copy, so that idle rooms hold
// little.
const maxRoomBuffer = 64 << 10

// take starts t's copy in room r: its buffers are the tee's.
func (t *shadowTee) take(r *teeRoom) {
	t.room, t.c = r, &r.c
	t.req, t.ans, t.v2ans = r.req[:0], r.ans[:0], r.v2ans[:0]
}

// recycle empties r and gives it back to the pool (nil-safe).
func (r *teeRoom) recycle() {
	if r == nil {
		return
	}
	r.c, r.sent, r.one[0] = shadow.Copy{}, shadow.Sent{}, nil
	r.req, r.ans, r.v2ans, r.pooled = reusable(r.req), reusable(r.ans), reusable(r.v2ans), reusable(r.pooled)
	teeRooms.Put(r)
}

// reusable is b emptied, or nil when it is too large to keep.
func reusable(b []byte) []byte {
	if cap(b) > maxRoomBuffer {
		return nil
	}
	return b[:0]
}
