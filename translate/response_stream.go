package translate

import (
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// ResponseStream translates one v2 response body fed in chunks, writing
// the TF Serving body as the v2 bytes arrive: the same bytes, and the same
// errors, as its Pipeline's Response on the whole body.
//
// A binary body (headerLength > 0) goes through three stages. The JSON
// header is collected and decoded (oip.DecodeResponseHeader), and every
// check that needs no tensor data is made (every output's name, datatype,
// shape, declared size, the signature, lim.MaxOutputBytes, TF Serving's
// own checks) before the first TF byte is written. Then the binary blocks
// are copied into the outputs' tensors as they arrive, and the body is
// written as soon as its bytes are known: column by column, or instance by
// instance. BYTES blocks are needed whole before anything is written
// (their strings are checked and sized first), and a row-format response
// with several outputs writes a row only once every output's part of it
// is there: the blocks are held, as the whole-body translation holds them.
// Memory: the v2 binary data plus one piece of at most
// tfresponse.PieceSize bytes, never the whole TF body. Fixed-size blocks
// are allocated when the header has been checked, their total first held
// to lim.MaxOutputBytes (when set), so a header cannot make the stream
// allocate what its answer could never be written within.
//
// An error is returned as soon as it is certain to be the whole-body
// translation's. A check that fails with an error that a short or long
// binary section would take precedence over (DecodeResponse checks the
// blocks' sizes first) is settled at Close, the body held until then.
// A JSON-only body (headerLength -1) is held whole (the caller bounds it)
// and translated at Close. Errors found after the first byte was emitted
// (a truncated body, bytes beyond the last block) are still returned, from
// Write or Close; the caller must then abort the response.
type ResponseStream struct {
	headerLength int
	answer       answerFunc
	ex           Exchange
	lim          tensor.Limits
	out          func([]byte) error

	state   streamState
	err     error // sticky: returned by every later call
	emitted int64

	header []byte // stHeader: the JSON header so far
	hold   []byte // stHold: the whole body so far

	// stBinary: the decoded header, the blocks' bytes (fixed-size ones
	// allocated whole and aliased by their tensor's Data), the block being
	// filled and how much of it has arrived, bytes past the last block,
	// BYTES blocks not yet complete, and the body once checked.
	outputs []tensor.Tensor
	blocks  []oip.Block
	data    [][]byte
	cur     int
	got     uint64
	extra   int
	pending int
	body    *tfresponse.Body
}

type streamState uint8

const (
	stHeader streamState = iota // collecting the JSON header
	stBinary                    // header checked, binary blocks arriving
	stHold                      // holding the whole body for Close
	stClosed
)

// newResponseStream returns a stream translating one v2 response body
// with the pipeline's answer (Pipeline.NewResponseStream).
func newResponseStream(headerLength int, answer answerFunc, ex Exchange, lim tensor.Limits, out func([]byte) error) *ResponseStream {
	s := &ResponseStream{headerLength: headerLength, answer: answer, ex: ex, lim: lim, out: out}
	if headerLength <= 0 {
		s.state = stHold // JSON only, or a length DecodeResponse rejects
	} else {
		s.header = make([]byte, 0, min(headerLength, tfresponse.PieceSize))
	}
	return s
}

// Emitted reports how many TF bytes out has received: while 0, an error
// can still become a TF error response.
func (s *ResponseStream) Emitted() int64 { return s.emitted }

// Write feeds the next chunk of the v2 body; chunk is not retained.
func (s *ResponseStream) Write(chunk []byte) error {
	if s.err != nil {
		return s.err
	}
	switch s.state {
	case stClosed:
		return s.fail(apierr.Errorf(apierr.Internal, "response stream: write after close"))
	case stHeader:
		need := s.headerLength - len(s.header)
		if len(chunk) < need {
			s.header = append(s.header, chunk...)
			return nil
		}
		s.header = append(s.header, chunk[:need]...)
		chunk = chunk[need:]
		if err := s.startBinary(); err != nil {
			return s.fail(err)
		}
	}
	if s.state == stHold {
		s.hold = append(s.hold, chunk...)
		return nil
	}
	return s.fail(s.binary(chunk))
}

// Close ends the body: it writes what is left of the TF body, or returns
// the error the whole-body translation returns.
func (s *ResponseStream) Close() error {
	if s.err != nil {
		return s.err
	}
	state := s.state
	s.state = stClosed
	switch state {
	case stClosed:
		return nil
	case stHeader: // the body ended inside the header
		s.hold = s.header
	case stBinary:
		if s.cur == len(s.blocks) && s.extra == 0 && s.body != nil {
			err := s.stream()
			if err == nil && !s.body.Done() {
				err = apierr.Errorf(apierr.Internal, "response stream: the body is incomplete with all its data")
			}
			s.release()
			s.header, s.outputs, s.data = nil, nil, nil // the tensors' memory, if the stream is kept
			return s.fail(err)
		}
		s.holdAll() // short, or too long: the whole-body error decides
	}
	return s.fail(s.translateHeld())
}

// startBinary decodes the complete JSON header. Its error is returned when
// final; any other means the body is held for Close.
func (s *ResponseStream) startBinary() error {
	h, final, err := oip.DecodeResponseHeader(s.header, s.ex.Signature, s.lim)
	if err != nil {
		if final {
			return badGateway(err)
		}
		s.state, s.hold = stHold, s.header
		return nil
	}
	// Fixed-size data is allocated whole before it arrives, so it is held
	// to the output cap first: every element's text is at least its
	// bytes, so data over the cap is refused by the body's size check in
	// any case, and the header alone must not cost its declared size.
	fixed := uint64(0)
	for _, b := range h.Blocks {
		if h.Outputs[b.Output].DataType != tensor.Bytes {
			fixed += b.Size // each bounded by lim.MaxElements elements
		}
	}
	if s.lim.MaxOutputBytes > 0 && fixed > uint64(s.lim.MaxOutputBytes) {
		s.state, s.hold = stHold, s.header
		return nil
	}
	s.state = stBinary
	s.outputs = h.Outputs
	for _, b := range h.Blocks {
		if b.Size > 0 { // an empty block holds nothing to wait for
			s.blocks = append(s.blocks, b)
		}
	}
	s.data = make([][]byte, len(s.blocks))
	for i, b := range s.blocks {
		t := &s.outputs[b.Output]
		switch t.DataType {
		case tensor.Bytes:
			s.data[i] = make([]byte, 0, min(b.Size, tfresponse.PieceSize))
			s.pending++
		default: // the size matches the shape, bounded by lim.MaxElements
			s.data[i] = make([]byte, b.Size)
			t.Data = s.data[i]
		}
	}
	return s.check()
}

// check makes the checks TF Serving makes after inference once every
// BYTES element is known, then streams what has arrived. A failure is
// settled at Close: a short or long binary section takes precedence.
func (s *ResponseStream) check() error {
	if s.pending > 0 {
		return nil
	}
	body, err := s.answer(s.outputs, s.ex, s.lim)
	if err != nil {
		s.holdAll()
		return nil
	}
	s.body = body
	for i, b := range s.blocks {
		switch {
		case i < s.cur:
			s.setAvailable(i, b.Size)
		case i == s.cur:
			s.setAvailable(i, s.got)
		default:
			s.setAvailable(i, 0)
		}
	}
	return s.stream()
}

// setAvailable tells the body that n bytes of block i are in place.
func (s *ResponseStream) setAvailable(i int, n uint64) {
	b := s.blocks[i]
	if t := &s.outputs[b.Output]; t.DataType != tensor.Bytes {
		s.body.SetAvailable(b.Output, int64(n)/int64(t.DataType.Size()))
	}
}

// binary takes the next bytes of the binary section.
func (s *ResponseStream) binary(p []byte) error {
	for len(p) > 0 && s.state == stBinary {
		if s.cur == len(s.blocks) {
			s.extra += len(p) // an error at Close, with their count
			return nil
		}
		b := s.blocks[s.cur]
		t := &s.outputs[b.Output]
		n := int(min(uint64(len(p)), b.Size-s.got))
		if t.DataType == tensor.Bytes {
			s.data[s.cur] = append(s.data[s.cur], p[:n]...)
		} else {
			copy(s.data[s.cur][s.got:], p[:n])
		}
		s.got += uint64(n)
		p = p[n:]
		if s.body != nil {
			s.setAvailable(s.cur, s.got)
		}
		if s.got < b.Size {
			break
		}
		s.cur, s.got = s.cur+1, 0
		if t.DataType == tensor.Bytes {
			// Final: the header passed and every earlier block is whole.
			if err := oip.FillBytes(t, s.data[s.cur-1]); err != nil {
				return badGateway(err)
			}
			s.pending--
			if err := s.check(); err != nil {
				return err
			}
		}
	}
	if s.state == stHold {
		s.hold = append(s.hold, p...)
		return nil
	}
	if s.body != nil {
		return s.stream()
	}
	return nil
}

// stream writes what the data that arrived allows.
func (s *ResponseStream) stream() error {
	return s.body.Stream(func(p []byte) error {
		s.emitted += int64(len(p))
		return s.out(p)
	})
}

// holdAll switches to holding the body for Close, rebuilding what
// arrived of it: the header, the blocks' bytes, any bytes past them.
func (s *ResponseStream) holdAll() {
	s.release()
	hold := s.header
	for i, d := range s.data {
		switch {
		case i < s.cur:
			hold = append(hold, d...)
		case i == s.cur:
			if s.outputs[s.blocks[i].Output].DataType == tensor.Bytes {
				hold = append(hold, d...)
			} else {
				hold = append(hold, d[:s.got]...)
			}
		}
	}
	hold = append(hold, make([]byte, s.extra)...)
	s.state, s.hold = stHold, hold
	s.outputs, s.data = nil, nil
}

// translateHeld translates the held whole body, writing it in pieces, or
// returns its error: the whole-body translation's, by construction.
func (s *ResponseStream) translateHeld() error {
	outputs, err := decodeOutputs(s.hold, s.headerLength, s.ex, s.lim)
	if err != nil {
		return err
	}
	body, err := s.answer(outputs, s.ex, s.lim)
	if err != nil {
		return err
	}
	s.body = body
	defer s.release()
	if s.emitted > 0 {
		return apierr.Errorf(apierr.Internal, "response stream: a body that started streaming translated whole")
	}
	return s.stream()
}

// release returns the body's pooled memory.
func (s *ResponseStream) release() {
	if s.body != nil {
		s.body.Release()
		s.body = nil
	}
}

// fail makes a non-nil err sticky and releases the body's memory.
func (s *ResponseStream) fail(err error) error {
	if err != nil {
		s.err = err
		s.release()
		s.hold, s.header, s.data, s.outputs = nil, nil, nil, nil
	}
	return err
}
