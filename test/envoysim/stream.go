package envoysim

import (
	"context"
	"sync"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// sideStream is one ExternalProcessor/Process stream. Envoy opens one per HTTP request,
// lazily, when the first message has to go out, and resets it when the request ends.
type sideStream struct {
	client extprocv3.ExternalProcessor_ProcessClient
	cancel context.CancelFunc
	// inbox carries every Recv result in order; a reader goroutine fills it so that the
	// filter can wait for a reply, a timeout and a downstream cancel at the same time,
	// like Envoy's event loop.
	inbox     chan received
	onInbox   func(*extprocv3.ProcessingResponse) // Config.onInbox
	done      chan struct{}
	closeOnce sync.Once
}

// received is one Recv result: a reply, or the error that ended the stream (io.EOF when the
// processor returned cleanly, a gRPC status otherwise).
type received struct {
	resp *extprocv3.ProcessingResponse
	err  error
}

// openSideStream starts a stream bound to ctx (cancelling ctx resets it).
func openSideStream(ctx context.Context, c extprocv3.ExternalProcessorClient, onInbox func(*extprocv3.ProcessingResponse)) (*sideStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	cl, err := c.Process(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &sideStream{client: cl, cancel: cancel, inbox: make(chan received, 4), onInbox: onInbox, done: make(chan struct{})}
	go s.read(ctx)
	return s, nil
}

// read pumps Recv into inbox until the stream ends or is reset. Replies queue without
// bound, as in Envoy, whose event loop takes every reply off the wire even while it is
// busy sending: a processor that writes replies while Envoy writes body chunks (full
// duplex) must never find its sends blocked by an Envoy that is not reading.
func (s *sideStream) read(ctx context.Context) {
	defer close(s.done)
	raw := make(chan received)
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			resp, err := s.client.Recv()
			select {
			case raw <- received{resp: resp, err: err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var queue []received
	for {
		var out chan received
		var next received
		if len(queue) > 0 {
			out, next = s.inbox, queue[0]
		}
		select {
		case r := <-raw:
			queue = append(queue, r)
		case out <- next:
			queue[0] = received{}
			queue = queue[1:]
			if s.onInbox != nil && next.resp != nil {
				s.onInbox(next.resp)
			}
		case <-ctx.Done():
			<-recvDone
			return
		}
	}
}

// close ends the stream the way Envoy's ExternalProcessorStreamImpl::close does: half-close,
// then reset. The processor therefore sees io.EOF or codes.Canceled from Recv, whichever
// its gRPC library notices first. close waits for the reader, so nothing leaks.
func (s *sideStream) close() {
	s.closeOnce.Do(func() {
		_ = s.client.CloseSend()
		s.cancel()
		<-s.done
	})
}
