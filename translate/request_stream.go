package translate

import (
	"errors"

	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
)

// RequestStream translates a predict body written in chunks of any size,
// never holding its text whole: Write each chunk, then Close. It answers
// as Pipeline.Request over the whole body would.
//
// The decoder (tfrequest.NewDecoder, the one Pipeline.Request runs over a
// whole body) reads the chunks and answers every body, TF Serving's status
// and text included, but for the few tfrequest.ErrUndecided lists. While
// the body is at most RequestOptions.ReplayBytes long a copy of its text
// is kept, and those few are answered by Pipeline.Request over it; longer
// ones get a 400 saying so.
type RequestStream struct {
	dec     *tfrequest.Decoder
	resolve tfrequest.Resolver
	opt     RequestOptions
	replay  int64
	text    *[]byte // the body so far, while it is at most replay long
	n       int64   // bytes written
	decErr  error   // the decoder's sticky error
}

// newRequestStream starts translating one streamed predict body.
func newRequestStream(resolve tfrequest.Resolver, opt RequestOptions) *RequestStream {
	s := &RequestStream{dec: tfrequest.NewDecoder(resolve, opt.Limits), resolve: resolve, opt: opt, replay: opt.replayBytes()}
	if s.replay > 0 {
		s.text = getReplay()
	}
	return s
}

// Write feeds the next chunk; the caller may reuse it afterwards. An error
// is final: the body cannot succeed and Close will return the same error.
func (s *RequestStream) Write(chunk []byte) error {
	s.n += int64(len(chunk))
	if s.text != nil {
		if s.n <= s.replay {
			*s.text = append(*s.text, chunk...)
		} else {
			s.dropText()
		}
	}
	if s.decErr == nil {
		s.decErr = s.dec.Write(chunk)
	}
	if s.decErr != nil && (s.text == nil || !errors.Is(s.decErr, tfrequest.ErrUndecided)) {
		return s.decErr
	}
	return nil
}

// Close ends the body and returns what Pipeline.Request would, the same
// bytes, in Parts for the binary extension (Triton, KServe): the header,
// then the tensor data as the decoder stored it, never copied. The caller
// calls Release on the V2Request once the body is sent.
func (s *RequestStream) Close() (V2Request, Exchange, error) {
	defer s.dropText()
	// Close also releases what a decoder that failed in Write holds.
	req, err := s.dec.Close()
	if err == nil {
		return encodeRequestParts(req, s.opt)
	}
	if s.text != nil && errors.Is(err, tfrequest.ErrUndecided) {
		return predictRequest(*s.text, s.resolve, s.opt)
	}
	return V2Request{}, Exchange{}, err
}

// Abort ends a stream that will not be closed (the exchange failed or the
// client went away): its kept text and the decoder's pooled blocks go back
// at once instead of waiting for the collector. Nothing is resolved or
// built; the stream cannot be used afterwards.
func (s *RequestStream) Abort() {
	s.dropText()
	s.dec.Abort()
}

// dropText gives the kept text back.
func (s *RequestStream) dropText() {
	if s.text != nil {
		putReplay(s.text)
		s.text = nil
	}
}

// replayFree holds the text buffers of a few streamed bodies between
// requests, so keeping a body's first ReplayBytes costs a copy, not an
// allocation grown by doubling. Unlike a sync.Pool it survives garbage
// collections, which a busy proxy runs every few requests; it is small,
// so it pins at most a few MiB.
var replayFree = make(chan *[]byte, 4)

func getReplay() *[]byte {
	select {
	case b := <-replayFree:
		return b
	default:
		b := make([]byte, 0, 64<<10)
		return &b
	}
}

func putReplay(b *[]byte) {
	if cap(*b) > 2*DefaultReplayBytes {
		return // one unusual ReplayBytes must not pin its buffer
	}
	*b = (*b)[:0]
	select {
	case replayFree <- b:
	default:
	}
}
