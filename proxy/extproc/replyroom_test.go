package extproc

import (
	"bytes"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// TestReplyRoomNoResidue: a stream's replies are built one after the other
// in the same pooled rooms (replyroom.go), each reused as soon as the
// previous one is sent. Every reply built in a room that held a richer one
// (more headers, a body, a mode_override, clear_route_cache, a request id,
// a chunk with end_of_stream) must encode to exactly the bytes of the same
// reply built fresh: nothing of the previous reply may leak into the next,
// whichever encoder (appendReply or protobuf) sends it. The rooms also
// survive the stream's end and a second end (freeRooms is idempotent), and
// a room taken again after its return is emptied.
func TestReplyRoomNoResidue(t *testing.T) {
	many := []session.Header{{Key: "content-type", Value: "application/json"}, {Key: "content-length", Value: "12345"},
		{Key: "accept-encoding", Value: "identity"}, {Key: "inference-header-content-length", Value: "77"},
		{Key: ":path", Value: "/v2/models/m/infer"}, {Key: "x-extra", Value: "e"}, {Key: "x-seventh", Value: "beyond the inline room"}}
	rich := session.Action{Verdict: session.Continue, Set: many, Remove: []string{"a", "b", "c"},
		ReplaceBody: true, Body: bytes.Repeat([]byte("b"), 3000), ClearRouteCache: true}
	bare := session.Action{Verdict: session.Continue}
	one := session.Action{Verdict: session.Continue, Set: many[:1]}
	pass := session.Action{Verdict: session.PassThrough}
	respond := session.Action{Verdict: session.Respond, Status: 400, Body: []byte(`{"error": "x"}`)}
	gsess := grpcSession(t)
	idSess := session.New(&session.Config{})
	idSess.RequestHeaders(t.Context(), "GET", "/not/tf/serving",
		headerMap{{Key: "x-request-id", RawValue: []byte("rid-7")}}, false)
	if idSess.RequestID() != "rid-7" {
		t.Fatalf("request id %q", idSess.RequestID())
	}

	type step struct {
		name        string
		room, fresh func(st *streamTrace) *extprocv3.ProcessingResponse
	}
	steps := []step{
		{"rich headers", func(st *streamTrace) *extprocv3.ProcessingResponse { return st.headersReply(rich, true) },
			func(*streamTrace) *extprocv3.ProcessingResponse { return headersReply(rich, true) }},
		{"bare body after rich", func(st *streamTrace) *extprocv3.ProcessingResponse { return st.bodyReply(bare, true) },
			func(*streamTrace) *extprocv3.ProcessingResponse { return bodyReply(bare, true) }},
		{"gRPC mode override", func(st *streamTrace) *extprocv3.ProcessingResponse {
			return grpcMode(gsess, bare, st.headersReply(bare, true))
		}, func(*streamTrace) *extprocv3.ProcessingResponse {
			return grpcMode(gsess, bare, headersReply(bare, true))
		}},
		{"headers after mode override", func(st *streamTrace) *extprocv3.ProcessingResponse { return st.headersReply(one, false) },
			func(*streamTrace) *extprocv3.ProcessingResponse { return headersReply(one, false) }},
		{"rich body", func(st *streamTrace) *extprocv3.ProcessingResponse { return st.bodyReply(rich, false) },
			func(*streamTrace) *extprocv3.ProcessingResponse { return bodyReply(rich, false) }},
		{"pass-through after rich", func(st *streamTrace) *extprocv3.ProcessingResponse { return st.headersReply(pass, true) },
			func(*streamTrace) *extprocv3.ProcessingResponse { return headersReply(pass, true) }},
		{"request id in the room", func(st *streamTrace) *extprocv3.ProcessingResponse {
			return st.headersReply(st.withRequestID(one, idSess, true), false)
		}, func(*streamTrace) *extprocv3.ProcessingResponse {
			return headersReply(withRequestID(one, idSess, true), false)
		}},
		{"no request id after one", func(st *streamTrace) *extprocv3.ProcessingResponse {
			return st.headersReply(st.withRequestID(one, idSess, false), false)
		}, func(*streamTrace) *extprocv3.ProcessingResponse { return headersReply(one, false) }},
		{"immediate after rich", func(st *streamTrace) *extprocv3.ProcessingResponse { return st.bodyReply(respond, false) },
			func(*streamTrace) *extprocv3.ProcessingResponse { return bodyReply(respond, false) }},
		{"last chunk", func(st *streamTrace) *extprocv3.ProcessingResponse {
			return st.streamedReply([]byte("abc"), true, false)
		},
			func(*streamTrace) *extprocv3.ProcessingResponse { return streamedReply([]byte("abc"), true, false) }},
		{"empty chunk after last", func(st *streamTrace) *extprocv3.ProcessingResponse { return st.streamedReply(nil, false, true) },
			func(*streamTrace) *extprocv3.ProcessingResponse { return streamedReply(nil, false, true) }},
	}
	encode := func(r *extprocv3.ProcessingResponse) []byte {
		if b, ok := appendReply(nil, r); ok {
			return b
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Twice over, the second time in rooms that came back from the pool
	// (possibly the same ones).
	for round := range 2 {
		st := &streamTrace{ctx: t.Context()}
		for _, s := range steps {
			got, want := encode(s.room(st)), encode(s.fresh(st))
			if !bytes.Equal(got, want) {
				t.Errorf("round %d, %s: the room's reply is %x, built fresh %x", round, s.name, got, want)
			}
		}
		st.end()
		st.end() // a second end gives nothing back twice
		if st.rooms != nil {
			t.Fatalf("round %d: rooms kept after the stream's end", round)
		}
	}
}
