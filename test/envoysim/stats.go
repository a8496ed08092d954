package envoysim

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Stats mirrors Envoy's http.<prefix>.ext_proc.* counters, plus a few counters of the
// stand-in itself (marked). Read them with Envoy.Stats.
type Stats struct {
	StreamsStarted                 uint64 // streams_started
	StreamsClosed                  uint64 // streams_closed
	StreamMsgsSent                 uint64 // stream_msgs_sent
	StreamMsgsReceived             uint64 // stream_msgs_received
	SpuriousMsgsReceived           uint64 // spurious_msgs_received
	StreamsFailed                  uint64 // streams_failed
	FailureModeAllowed             uint64 // failure_mode_allowed
	MessageTimeouts                uint64 // message_timeouts
	RejectedHeaderMutations        uint64 // rejected_header_mutations
	OverrideMessageTimeoutReceived uint64 // override_message_timeout_received
	OverrideMessageTimeoutIgnored  uint64 // override_message_timeout_ignored
	ClearRouteCacheIgnored         uint64 // clear_route_cache_ignored
	ImmediateResponses             uint64 // stand-in: immediate_response replies honoured
	ModeOverrides                  uint64 // stand-in: mode_override replies honoured
	ModeOverridesIgnored           uint64 // stand-in: mode_override replies ignored
	LocalReplies                   uint64 // stand-in: local replies sent downstream (any origin)

	// FULL_DUPLEX_STREAMED (all stand-in counters).
	RequestChunksSent          uint64 // request_body messages sent to the processor
	ResponseChunksSent         uint64 // response_body messages sent to the processor
	RequestChunksReceived      uint64 // streamed_response replies applied to the request body
	ResponseChunksReceived     uint64 // streamed_response replies applied to the response body
	LargestChunkSent           uint64 // largest body message sent, in bytes
	LargestChunkReceived       uint64 // largest streamed_response body received, in bytes
	BodyHeaderMutationsIgnored uint64 // header mutations in streamed body replies (Envoy ignores them)
	ContentLengthSetsDropped   uint64 // content-length sets Envoy drops (streamed modes strip it)
}

// counters is the live, concurrency-safe form of Stats.
type counters struct {
	streamsStarted, streamsClosed, msgsSent, msgsReceived, spurious, streamsFailed,
	failureModeAllowed, messageTimeouts, rejectedMutations, overrideReceived, overrideIgnored,
	clearRouteCacheIgnored, immediateResponses, modeOverrides, modeOverridesIgnored,
	localReplies atomic.Uint64
	// chunksSent and chunksReceived are indexed by direction (0 request, 1 response).
	chunksSent, chunksReceived                     [2]atomic.Uint64
	largestSent, largestReceived                   atomic.Uint64
	bodyHeaderMutationsIgnored, contentLengthDrops atomic.Uint64
}

// storeMax raises c to n if n is larger.
func storeMax(c *atomic.Uint64, n uint64) {
	for {
		old := c.Load()
		if n <= old || c.CompareAndSwap(old, n) {
			return
		}
	}
}

func (c *counters) snapshot() Stats {
	return Stats{
		StreamsStarted:                 c.streamsStarted.Load(),
		StreamsClosed:                  c.streamsClosed.Load(),
		StreamMsgsSent:                 c.msgsSent.Load(),
		StreamMsgsReceived:             c.msgsReceived.Load(),
		SpuriousMsgsReceived:           c.spurious.Load(),
		StreamsFailed:                  c.streamsFailed.Load(),
		FailureModeAllowed:             c.failureModeAllowed.Load(),
		MessageTimeouts:                c.messageTimeouts.Load(),
		RejectedHeaderMutations:        c.rejectedMutations.Load(),
		OverrideMessageTimeoutReceived: c.overrideReceived.Load(),
		OverrideMessageTimeoutIgnored:  c.overrideIgnored.Load(),
		ClearRouteCacheIgnored:         c.clearRouteCacheIgnored.Load(),
		ImmediateResponses:             c.immediateResponses.Load(),
		ModeOverrides:                  c.modeOverrides.Load(),
		ModeOverridesIgnored:           c.modeOverridesIgnored.Load(),
		LocalReplies:                   c.localReplies.Load(),
		RequestChunksSent:              c.chunksSent[0].Load(),
		ResponseChunksSent:             c.chunksSent[1].Load(),
		RequestChunksReceived:          c.chunksReceived[0].Load(),
		ResponseChunksReceived:         c.chunksReceived[1].Load(),
		LargestChunkSent:               c.largestSent.Load(),
		LargestChunkReceived:           c.largestReceived.Load(),
		BodyHeaderMutationsIgnored:     c.bodyHeaderMutationsIgnored.Load(),
		ContentLengthSetsDropped:       c.contentLengthDrops.Load(),
	}
}

// Exchange records what happened to one downstream request.
type Exchange struct {
	// RequestID is the x-request-id the request carried through Envoy.
	RequestID string
	// Method and Path are as received from the downstream client.
	Method, Path string
	// Proto is the downstream protocol: "HTTP/1.1" or "HTTP/2.0".
	Proto string
	// Status is the status sent downstream; 0 when the stream was reset instead.
	Status int
	// Details is the equivalent of %RESPONSE_CODE_DETAILS%: "via_upstream", or the local
	// reply's details (e.g. "ext_proc_error_per-message_timeout_exceeded").
	Details string
	// Trace lists the ext_proc messages in order: "> request_headers" sent by Envoy,
	// "< request_headers" received from the processor.
	Trace []string
}

// journal bounds what the stand-in remembers, so a long load test cannot grow it forever.
const journalLimit = 4096

// journal collects violations, notes and exchanges; safe for concurrent use.
type journal struct {
	mu         sync.Mutex
	violations []string
	// notes are kept unformatted until read: they are diagnostics, and
	// formatting them as they come (several per exchange for a processor
	// that sets append_action on every header) was stand-in cost that Envoy
	// does not have, charged to the processor's row of a benchmark.
	notes     []pendingNote
	dropped   int
	exchanges []Exchange
}

func (j *journal) violation(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.violations) >= journalLimit {
		j.dropped++
		return
	}
	j.violations = append(j.violations, s)
}

// pendingNote is a note not yet formatted; its args are values.
type pendingNote struct {
	format string
	args   []any
}

func (j *journal) note(format string, args []any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.notes) < journalLimit {
		j.notes = append(j.notes, pendingNote{format, args})
	}
}

func (j *journal) exchange(x Exchange) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.exchanges) >= journalLimit {
		j.exchanges = append(j.exchanges[:0], j.exchanges[len(j.exchanges)-journalLimit/2:]...)
	}
	j.exchanges = append(j.exchanges, x)
}

func (j *journal) snapshotViolations() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := append([]string(nil), j.violations...)
	if j.dropped > 0 {
		out = append(out, "envoysim: further violations dropped")
	}
	return out
}

func (j *journal) snapshotNotes() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]string, len(j.notes))
	for i, n := range j.notes {
		out[i] = fmt.Sprintf(n.format, n.args...)
	}
	return out
}

func (j *journal) snapshotExchanges() []Exchange {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Exchange(nil), j.exchanges...)
}
