package extproc

import (
	"errors"
	"sync/atomic"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tfsbridge/tfsbridge/internal/framepool"
)

// bodyCodec is the ext_proc server's gRPC codec: grpc-go's protobuf codec,
// except for the messages that carry a large body (BUFFERED mode sends a
// whole request or response body as one message, and gets the translated
// one back as another).
//
// The default codec costs such a body two extra copies each way. On
// receipt it gathers the message's frames into one pooled buffer and
// protobuf copies the body out of it; bodyCodec gathers them into a fresh
// buffer and lets HttpBody.body alias it (the body is then held once,
// not three times, while it is translated). On sending it marshals the
// whole message into a pooled buffer; bodyCodec encodes the message
// without its body mutation, appends the body mutation's framing as a
// second occurrence of the same fields (protobuf merges repeated
// occurrences of a singular message field, Envoy's parser included), and
// hands gRPC the body itself as the last buffer of the message: the
// transport copies it into its frames and nothing else does.
type bodyCodec struct{ std encoding.CodecV2 }

// largeBody is the size from which a body skips the default codec: below
// it the copies cost less than the framing work.
const largeBody = 64 << 10

func newBodyCodec() encoding.CodecV2 {
	return bodyCodec{std: encoding.GetCodecV2(protoenc.Name)}
}

func (c bodyCodec) Name() string { return protoenc.Name }

// The field numbers the codec reads and writes, from the descriptors.
var (
	prRequestBody  = fieldNumber(&extprocv3.ProcessingRequest{}, "request_body")
	prResponseBody = fieldNumber(&extprocv3.ProcessingRequest{}, "response_body")
	hbBody         = fieldNumber(&extprocv3.HttpBody{}, "body")
	respReqBody    = fieldNumber(&extprocv3.ProcessingResponse{}, "request_body")
	respRespBody   = fieldNumber(&extprocv3.ProcessingResponse{}, "response_body")
	brResponse     = fieldNumber(&extprocv3.BodyResponse{}, "response")
	crBodyMutation = fieldNumber(&extprocv3.CommonResponse{}, "body_mutation")
	bmBody         = fieldNumber(&extprocv3.BodyMutation{}, "body")
)

func fieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	f := m.ProtoReflect().Descriptor().Fields().ByName(name)
	if f == nil {
		panic("extproc: no field " + string(name))
	}
	return f.Number()
}

func (c bodyCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch r := v.(type) {
	case *extprocv3.ProcessingResponse:
		if l, ok := layReply(r); ok { // replywire.go
			return encodeReply(&l), nil
		}
		if out, ok, err := marshalBodyResponse(r, nil); ok || err != nil {
			return out, err
		}
	case *partsResponse:
		out, ok, err := marshalBodyResponse(r.msg, r.parts)
		if ok && err == nil && r.release != nil {
			out = r.handOver(out)
		}
		if ok || err != nil {
			return out, err
		}
		return nil, errors.New("extproc: parts given to a message without a body mutation")
	}
	return c.std.Marshal(v)
}

// replyPool holds the buffers replies are encoded into. grpc-go Frees a
// message's buffers once its frames are written, so a full-duplex stream
// sending a large body as a train of chunk replies reuses a few buffers
// instead of leaving one of garbage per chunk (which grew a 64 MiB
// request's peak heap by half its tensor). Nothing reads a buffer before
// the encoder writes it, so it is not cleared.
var replyPool = framepool.New()

// encodeReply encodes the reply l lays out, in a buffer of replyPool when
// it is large enough for grpc-go to pool.
func encodeReply(l *replyLayout) mem.BufferSlice {
	if mem.IsBelowBufferPoolingThreshold(l.total) {
		return mem.BufferSlice{mem.SliceBuffer(l.append(make([]byte, 0, l.total)))}
	}
	buf := replyPool.Get(l.total)
	*buf = l.append((*buf)[:0])
	return mem.BufferSlice{mem.NewBuffer(buf, replyPool)}
}

// partsResponse is a body reply whose body mutation's body is parts (its
// own Body is left empty): bodyCodec sends the parts where they lie.
// release, when set, returns the parts' memory (a translated answer's
// pooled buffer): see handOver.
type partsResponse struct {
	msg     *extprocv3.ProcessingResponse
	parts   [][]byte
	release func()
}

// handOver gives the release of r's parts to out, the message Marshal
// built. grpc-go's Send does not copy a message's buffers before it
// returns: the server transport takes a reference to them (Ref) and
// queues them for its writer goroutine, which copies them into HTTP/2
// frames later and then Frees them (grpc 1.85 http2Server.write and
// loopyWriter; on a broken stream the queue is freed the same way). So
// the parts may be reused only once grpc-go has Freed every buffer that
// holds them: each becomes a counted mem.Buffer whose pool's Put is the
// count's end, and the last Put releases the parts, exactly once. A part
// too small for grpc-go to count (mem.NewBuffer gives such a slice no
// pool) is copied instead. Once handed over, r.release is nil: the
// sender calls releaseUnsent after Send for the cases Marshal never ran.
func (r *partsResponse) handOver(out mem.BufferSlice) mem.BufferSlice {
	rc := &releaser{release: r.release}
	r.release = nil
	rc.refs.Add(1) // held while the slice is built
	for i, b := range out[1:] {
		p := b.ReadOnlyData()
		if mem.IsBelowBufferPoolingThreshold(cap(p)) {
			out[i+1] = mem.SliceBuffer(append([]byte(nil), p...))
			continue
		}
		rc.refs.Add(1)
		out[i+1] = mem.NewBuffer(&p, rc)
	}
	rc.Put(nil)
	return out
}

// releaseUnsent releases the parts when Marshal did not take them (Send
// failed before encoding, or the message was not encoded by bodyCodec).
func (r *partsResponse) releaseUnsent() {
	if r.release != nil {
		r.release()
		r.release = nil
	}
}

// releaser is the mem.BufferPool of a translated answer's parts: it
// counts the buffers grpc-go holds and releases the parts at the last.
type releaser struct {
	refs    atomic.Int32
	release func()
}

func (rc *releaser) Get(int) *[]byte { panic("extproc: releaser is not a pool to get from") }

func (rc *releaser) Put(*[]byte) {
	if rc.refs.Add(-1) == 0 {
		rc.release()
	}
}

// marshalBodyResponse encodes a body reply whose body mutation carries a
// large body (parts, when given, or its Body) without copying the body;
// ok is false for any other message.
func marshalBodyResponse(r *extprocv3.ProcessingResponse, parts [][]byte) (_ mem.BufferSlice, ok bool, _ error) {
	var br *extprocv3.BodyResponse
	field := respReqBody
	switch m := r.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestBody:
		br = m.RequestBody
	case *extprocv3.ProcessingResponse_ResponseBody:
		br, field = m.ResponseBody, respRespBody
	default:
		return nil, false, nil
	}
	cr := br.GetResponse()
	bm := cr.GetBodyMutation()
	body, isBody := bm.GetMutation().(*extprocv3.BodyMutation_Body)
	if !isBody || bm.ProtoReflect().GetUnknown() != nil {
		return nil, false, nil
	}
	given := parts != nil
	if !given {
		parts = [][]byte{body.Body}
	} else if len(body.Body) > 0 {
		return nil, false, errors.New("extproc: a body reply with both a body and parts")
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n < largeBody && !given {
		return nil, false, nil
	}
	// The message without its body mutation, then the mutation alone as a
	// second occurrence of request_body { response { body_mutation { body } } }.
	cr.BodyMutation = nil
	head, err := proto.MarshalOptions{}.MarshalAppend(make([]byte, 0, proto.Size(r)+32), r)
	cr.BodyMutation = bm
	if err != nil {
		return nil, true, err
	}
	bmLen := protowire.SizeTag(bmBody) + protowire.SizeBytes(n)
	crLen := protowire.SizeTag(crBodyMutation) + protowire.SizeBytes(bmLen)
	brLen := protowire.SizeTag(brResponse) + protowire.SizeBytes(crLen)
	head = protowire.AppendTag(head, field, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(brLen))
	head = protowire.AppendTag(head, brResponse, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(crLen))
	head = protowire.AppendTag(head, crBodyMutation, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(bmLen))
	head = protowire.AppendTag(head, bmBody, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(n))
	out := make(mem.BufferSlice, 0, 1+len(parts))
	out = append(out, mem.SliceBuffer(head))
	for _, p := range parts {
		if len(p) > 0 {
			out = append(out, mem.SliceBuffer(p))
		}
	}
	return out, true, nil
}

func (c bodyCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch r := v.(type) {
	case *extprocv3.ProcessingRequest:
		if data.Len() >= largeBody {
			return unmarshalBodyRequest(data.Materialize(), r)
		}
	case *framedRequest:
		r.codec = true
		if data.Len() >= r.min() {
			return r.unmarshal(data)
		}
		if isHeaders(data) {
			buf := data.Materialize() // the headers' strings alias it
			if ok, err := unmarshalHeaders(buf, r.ProcessingRequest); ok {
				return err
			}
			return proto.Unmarshal(buf, r.ProcessingRequest)
		}
		return c.std.Unmarshal(data, r.ProcessingRequest)
	}
	return c.std.Unmarshal(data, v)
}

// framedRequest is a ProcessingRequest received in place: a large
// request_body's body is left in the gRPC message's frames, which chunks
// alias (msg's HttpBody.Body is then nil), until free. The BUFFERED loop
// receives into it, so that a whole body is translated from the bytes
// that arrived, never gathered into one slice.
//
// The message is embedded, so that a server with another codec (a
// Processor registered on a grpc.Server of its own) decodes it as the
// ProcessingRequest it is, bodies and all: chunks are then nil.
type framedRequest struct {
	*extprocv3.ProcessingRequest
	chunks [][]byte
	data   mem.BufferSlice // held for chunks
	// streamed: a full-duplex chunk, left in its frames from
	// fdFramedBytes bytes on (the session parses it where it lies, and the
	// frames go back to gRPC's pool instead of becoming garbage).
	streamed bool
	// codec: bodyCodec decoded the message, so it also encodes the
	// replies (partsResponse is ours to send).
	codec bool
	// scratch is unmarshal's list of the frames' bytes.
	scratch [][]byte
}

// fdFramedBytes is the size from which a full-duplex chunk is left in its
// frames.
const fdFramedBytes = 16 << 10

func (f *framedRequest) min() int {
	if f.streamed {
		return fdFramedBytes
	}
	return largeBody
}

// free lets the frames go (back to gRPC's pool).
func (f *framedRequest) free() {
	if f.data != nil {
		f.data.Free()
		f.data, f.chunks = nil, nil
	}
}

// unmarshal decodes data into f: a request_body's body as chunks of the
// frames, everything else by protobuf (a few bytes, copied out). A
// message of any other shape, or one this reader does not follow (a
// group field, a length past the message), is gathered and decoded as
// usual, so that it fails or succeeds exactly as protobuf says.
func (f *framedRequest) unmarshal(data mem.BufferSlice) error {
	// The frames' bytes, in a slice kept from one message of the stream
	// to the next (cleared after, so that it holds no frame).
	bufs := f.scratch[:0]
	for _, b := range data {
		bufs = append(bufs, b.ReadOnlyData())
	}
	f.scratch = bufs
	defer clear(bufs)
	c := &cursor{bufs: bufs}
	var rest, hbRest []byte
	var body [][]byte
	seen := false
	for !c.done() {
		at := c.mark()
		num, typ, ok := c.field()
		if !ok {
			return unmarshalBodyRequest(data.Materialize(), f.ProcessingRequest)
		}
		if num == prResponseBody {
			// A v2 answer: gathered, as the session reads it whole.
			return unmarshalBodyRequest(data.Materialize(), f.ProcessingRequest)
		}
		if num != prRequestBody || typ != protowire.BytesType {
			if !c.skipValue(typ) {
				return unmarshalBodyRequest(data.Materialize(), f.ProcessingRequest)
			}
			rest = c.appendSince(rest, at)
			continue
		}
		if seen {
			return unmarshalBodyRequest(data.Materialize(), f.ProcessingRequest)
		}
		seen = true
		l, ok := c.varint()
		if !ok || l > uint64(c.left()) {
			return unmarshalBodyRequest(data.Materialize(), f.ProcessingRequest)
		}
		end := c.pos + int(l)
		for c.pos < end {
			at := c.mark()
			num, typ, ok := c.field()
			if !ok || c.pos > end {
				return unmarshalBodyRequest(data.Materialize(), f.ProcessingRequest)
			}
			if num == hbBody && typ == protowire.BytesType {
				n, ok := c.varint()
				if !ok || n > uint64(end-c.pos) {
					return unmarshalBodyRequest(data.Materialize(), f.ProcessingRequest)
				}
				body = c.take(int(n))
				continue
			}
			if !c.skipValue(typ) || c.pos > end {
				return unmarshalBodyRequest(data.Materialize(), f.ProcessingRequest)
			}
			hbRest = c.appendSince(hbRest, at)
		}
	}
	if !seen || c.bad {
		return unmarshalBodyRequest(data.Materialize(), f.ProcessingRequest)
	}
	if err := proto.Unmarshal(rest, f.ProcessingRequest); err != nil {
		return err
	}
	if f.Request != nil {
		// Another member of the oneof too: the wire order decides.
		return unmarshalBodyRequest(data.Materialize(), f.ProcessingRequest)
	}
	h := &extprocv3.HttpBody{}
	if err := proto.Unmarshal(hbRest, h); err != nil {
		return err
	}
	f.Request = &extprocv3.ProcessingRequest_RequestBody{RequestBody: h}
	if body == nil {
		body = [][]byte{}
	}
	f.chunks = body
	data.Ref()
	f.data = data
	return nil
}

// cursor reads protobuf wire format across the buffers of a message.
type cursor struct {
	bufs [][]byte
	i    int  // current buffer
	off  int  // offset in it
	pos  int  // offset in the message
	bad  bool // a group or a truncated value: decode it the usual way
}

func (c *cursor) done() bool {
	for c.i < len(c.bufs) && c.off == len(c.bufs[c.i]) {
		c.i, c.off = c.i+1, 0
	}
	return c.i == len(c.bufs)
}

func (c *cursor) left() int {
	n := 0
	for j := c.i; j < len(c.bufs); j++ {
		n += len(c.bufs[j])
	}
	return n - c.off
}

func (c *cursor) byte() (byte, bool) {
	if c.done() {
		return 0, false
	}
	b := c.bufs[c.i][c.off]
	c.off++
	c.pos++
	return b, true
}

// varint reads a varint.
func (c *cursor) varint() (uint64, bool) {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		b, ok := c.byte()
		if !ok {
			return 0, false
		}
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, true
		}
	}
	return 0, false
}

// field reads a tag and returns it decoded.
func (c *cursor) field() (protowire.Number, protowire.Type, bool) {
	t, ok := c.varint()
	if !ok {
		return 0, 0, false
	}
	num, typ := protowire.DecodeTag(t)
	if num <= 0 || typ == protowire.StartGroupType || typ == protowire.EndGroupType {
		c.bad = true
		return 0, 0, false
	}
	return num, typ, true
}

// mark is a cursor's place, for appendSince.
type mark struct{ i, off int }

func (c *cursor) mark() mark { return mark{c.i, c.off} }

// appendSince appends the bytes read since m to out as they are on the
// wire: a field copied on keeps its encoding (an unknown field is kept by
// protobuf byte for byte, a varint written longer than it needs included).
func (c *cursor) appendSince(out []byte, m mark) []byte {
	for i, off := m.i, m.off; i <= c.i && i < len(c.bufs); i, off = i+1, 0 {
		end := len(c.bufs[i])
		if i == c.i {
			end = c.off
		}
		out = append(out, c.bufs[i][off:end]...)
	}
	return out
}

// skipValue reads past a value of type typ.
func (c *cursor) skipValue(typ protowire.Type) bool {
	var n int
	switch typ {
	case protowire.VarintType:
		if _, ok := c.varint(); !ok {
			c.bad = true
			return false
		}
		return true
	case protowire.Fixed32Type:
		n = 4
	case protowire.Fixed64Type:
		n = 8
	case protowire.BytesType:
		l, ok := c.varint()
		if !ok || l > uint64(c.left()) {
			c.bad = true
			return false
		}
		n = int(l)
	default:
		c.bad = true
		return false
	}
	if n > c.left() {
		c.bad = true
		return false
	}
	for n > 0 && !c.done() {
		k := min(n, len(c.bufs[c.i])-c.off)
		c.off += k
		c.pos += k
		n -= k
	}
	return true
}

// take returns the next n bytes as slices of the buffers (in one
// allocation: a body spans a hundred frames).
func (c *cursor) take(n int) [][]byte {
	spans := 0
	for j, off, m := c.i, c.off, n; m > 0 && j < len(c.bufs); j, off = j+1, 0 {
		if l := len(c.bufs[j]) - off; l > 0 {
			spans++
			m -= l
		}
	}
	out := make([][]byte, 0, spans)
	for n > 0 && !c.done() {
		b := c.bufs[c.i][c.off:]
		k := min(n, len(b))
		out = append(out, b[:k:k])
		c.off += k
		c.pos += k
		n -= k
	}
	return out
}

// errMalformed is a message the wire format cannot read.
var errMalformed = errors.New("extproc: malformed ProcessingRequest")

// splitOneof finds in buf, a ProcessingRequest, the message of its oneof
// field a or b: the field's number, its message's bytes (inner) and the
// message's other fields (rest). field is 0 when neither occurs, or when
// one occurs more than once (protobuf merges the occurrences: leave that
// to it); err is errMalformed when the wire format cannot be read.
func splitOneof(buf []byte, a, b protowire.Number) (field protowire.Number, inner, rest []byte, err error) {
	for p := buf; len(p) > 0; {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return 0, nil, nil, errMalformed
		}
		m := protowire.ConsumeFieldValue(num, typ, p[n:])
		if m < 0 {
			return 0, nil, nil, errMalformed
		}
		if (num == a || num == b) && typ == protowire.BytesType {
			if field != 0 {
				return 0, nil, nil, nil
			}
			field = num
			inner, _ = protowire.ConsumeBytes(p[n:])
		} else {
			rest = append(rest, p[:n+m]...)
		}
		p = p[n+m:]
	}
	return field, inner, rest, nil
}

// unmarshalBodyRequest decodes buf, a fresh buffer nothing else holds,
// into r, the body of a request_body or response_body aliasing buf.
// Anything unusual (a body message in two occurrences) is decoded by
// protobuf itself, which copies.
func unmarshalBodyRequest(buf []byte, r *extprocv3.ProcessingRequest) error {
	field, hb, rest, err := splitOneof(buf, prRequestBody, prResponseBody)
	if err != nil {
		return err
	}
	if field == 0 {
		return proto.Unmarshal(buf, r)
	}
	// The HttpBody: every field but the body decoded by protobuf, the
	// body (the last occurrence wins, as for any scalar) aliased.
	var hbRest, body []byte
	for b := hb; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return errMalformed
		}
		if num == hbBody && typ == protowire.BytesType {
			body, _ = protowire.ConsumeBytes(b[n:])
		} else {
			hbRest = append(hbRest, b[:n+m]...)
		}
		b = b[n+m:]
	}
	if err := proto.Unmarshal(rest, r); err != nil {
		return err
	}
	if r.Request != nil {
		// Another member of the oneof too: the wire order decides.
		return proto.Unmarshal(buf, r)
	}
	h := &extprocv3.HttpBody{}
	if err := proto.Unmarshal(hbRest, h); err != nil {
		return err
	}
	if body != nil {
		h.Body = body[:len(body):len(body)]
	}
	if field == prRequestBody {
		r.Request = &extprocv3.ProcessingRequest_RequestBody{RequestBody: h}
	} else {
		r.Request = &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: h}
	}
	return nil
}
