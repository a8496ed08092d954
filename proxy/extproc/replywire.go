package extproc

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// appendReply encodes r, a headers or body reply as reply and chunkReply
// build them, in protobuf's wire format, without protobuf's reflection:
// grpc-go's codec walks a message three times (two sizes and the
// encoding) through per-field function tables, and the four replies of a
// small exchange cost it more than the rest of the send. ok is false for
// any message that sets a field this encoder does not write (immediate
// and trailers replies, metadata, …) and for a body mutation of
// largeBody bytes or more: the codec's other paths encode those. The bytes
// are protobuf's own (TestAppendReply), and TestAppendReplyFields checks
// that every field of these messages is either written here or refused.
func appendReply(b []byte, r *extprocv3.ProcessingResponse) (_ []byte, ok bool) {
	l, ok := layReply(r)
	if !ok {
		return b, false
	}
	return l.append(slices.Grow(b, l.total)), true
}

// replyLayout is what appendReply writes of a reply, sized: total bytes
// in all.
type replyLayout struct {
	r                  *extprocv3.ProcessingResponse
	cr                 *extprocv3.CommonResponse
	field              protowire.Number
	crLen, inner, mode int
	total              int
}

// layReply sizes r for appendReply; ok is false for a reply it does not
// write.
func layReply(r *extprocv3.ProcessingResponse) (l replyLayout, ok bool) {
	//nolint:staticcheck // a deprecated field is still sent when set: such a reply is protobuf's to encode
	if r.DynamicMetadata != nil || len(r.TypedDynamicMetadata) > 0 || r.RequestDrain ||
		r.RequestDrainRequests || r.RequestDrainResponses || r.OverrideMessageTimeout != nil ||
		r.ServerWindowUpdate != nil {
		return l, false
	}
	l.r = r
	switch m := r.Response.(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		if m.RequestHeaders == nil {
			return l, false
		}
		l.cr, l.field = m.RequestHeaders.Response, respReqHeaders
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		if m.ResponseHeaders == nil {
			return l, false
		}
		l.cr, l.field = m.ResponseHeaders.Response, respRespHeaders
	case *extprocv3.ProcessingResponse_RequestBody:
		if m.RequestBody == nil {
			return l, false
		}
		l.cr, l.field = m.RequestBody.Response, respReqBody
	case *extprocv3.ProcessingResponse_ResponseBody:
		if m.ResponseBody == nil {
			return l, false
		}
		l.cr, l.field = m.ResponseBody.Response, respRespBody
	default:
		return l, false
	}
	if l.crLen, ok = commonSize(l.cr); !ok {
		return l, false
	}
	// HeadersResponse and BodyResponse: one field, the CommonResponse.
	if l.cr != nil {
		l.inner = protowire.SizeTag(hrResponse) + protowire.SizeBytes(l.crLen)
	}
	l.total = protowire.SizeTag(l.field) + protowire.SizeBytes(l.inner)
	if r.ModeOverride != nil {
		l.mode = proto.Size(r.ModeOverride)
		l.total += protowire.SizeTag(respModeOverride) + protowire.SizeBytes(l.mode)
	}
	return l, true
}

// append writes the reply to b, which has room for l.total more bytes.
func (l *replyLayout) append(b []byte) []byte {
	if l.r.ModeOverride != nil {
		// Pass-through and gRPC exchanges only: protobuf encodes it.
		// (Protobuf writes a message's plain fields before its oneofs.)
		b = protowire.AppendTag(b, respModeOverride, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(l.mode))
		// A ModeOverride marshals without error: it has no required
		// fields, and its size was just computed.
		b, _ = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(b, l.r.ModeOverride)
	}
	b = protowire.AppendTag(b, l.field, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(l.inner))
	if l.cr != nil {
		b = protowire.AppendTag(b, hrResponse, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(l.crLen))
		b = appendCommon(b, l.cr)
	}
	return b
}

// The field numbers appendReply writes, from the descriptors.
var (
	respReqHeaders   = fieldNumber(&extprocv3.ProcessingResponse{}, "request_headers")
	respRespHeaders  = fieldNumber(&extprocv3.ProcessingResponse{}, "response_headers")
	respModeOverride = fieldNumber(&extprocv3.ProcessingResponse{}, "mode_override")
	hrResponse       = fieldNumber(&extprocv3.HeadersResponse{}, "response")
	crStatus         = fieldNumber(&extprocv3.CommonResponse{}, "status")
	crHeaderMutation = fieldNumber(&extprocv3.CommonResponse{}, "header_mutation")
	crClearRoute     = fieldNumber(&extprocv3.CommonResponse{}, "clear_route_cache")
	hmSetHeaders     = fieldNumber(&extprocv3.HeaderMutation{}, "set_headers")
	hmRemoveHeaders  = fieldNumber(&extprocv3.HeaderMutation{}, "remove_headers")
	bmStreamed       = fieldNumber(&extprocv3.BodyMutation{}, "streamed_response")
	sbrBody          = fieldNumber(&extprocv3.StreamedBodyResponse{}, "body")
	sbrEnd           = fieldNumber(&extprocv3.StreamedBodyResponse{}, "end_of_stream")
	hvoHeader        = fieldNumber(&corev3.HeaderValueOption{}, "header")
	hvoAppendAction  = fieldNumber(&corev3.HeaderValueOption{}, "append_action")
	hvKey            = fieldNumber(&corev3.HeaderValue{}, "key")
	hvRawValue       = fieldNumber(&corev3.HeaderValue{}, "raw_value")
)

// brResponse (BodyResponse.response) is HeadersResponse.response's twin:
// both messages are written as one.
func init() {
	if brResponse != hrResponse {
		panic("extproc: HeadersResponse.response and BodyResponse.response differ")
	}
}

// commonSize is the encoded size of cr (nil: 0); ok is false when cr sets
// a field appendCommon does not write.
func commonSize(cr *extprocv3.CommonResponse) (n int, ok bool) {
	if cr == nil {
		return 0, true
	}
	if cr.Trailers != nil {
		return 0, false
	}
	if cr.Status != 0 {
		n += protowire.SizeTag(crStatus) + protowire.SizeVarint(uint64(cr.Status))
	}
	if hm := cr.HeaderMutation; hm != nil {
		k, ok := mutationSize(hm)
		if !ok {
			return 0, false
		}
		n += protowire.SizeTag(crHeaderMutation) + protowire.SizeBytes(k)
	}
	if bm := cr.BodyMutation; bm != nil {
		k, ok := bodyMutationSize(bm)
		if !ok {
			return 0, false
		}
		n += protowire.SizeTag(crBodyMutation) + protowire.SizeBytes(k)
	}
	if cr.ClearRouteCache {
		n += protowire.SizeTag(crClearRoute) + 1
	}
	return n, true
}

func appendCommon(b []byte, cr *extprocv3.CommonResponse) []byte {
	if cr.Status != 0 {
		b = protowire.AppendTag(b, crStatus, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(cr.Status))
	}
	if hm := cr.HeaderMutation; hm != nil {
		k, _ := mutationSize(hm)
		b = protowire.AppendTag(b, crHeaderMutation, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(k))
		for _, o := range hm.SetHeaders {
			k, _ := optionSize(o)
			b = protowire.AppendTag(b, hmSetHeaders, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(k))
			if h := o.Header; h != nil {
				b = protowire.AppendTag(b, hvoHeader, protowire.BytesType)
				b = protowire.AppendVarint(b, uint64(headerSize(h)))
				if h.Key != "" {
					b = protowire.AppendTag(b, hvKey, protowire.BytesType)
					b = protowire.AppendString(b, h.Key)
				}
				if len(h.RawValue) > 0 {
					b = protowire.AppendTag(b, hvRawValue, protowire.BytesType)
					b = protowire.AppendBytes(b, h.RawValue)
				}
			}
			if o.AppendAction != 0 {
				b = protowire.AppendTag(b, hvoAppendAction, protowire.VarintType)
				b = protowire.AppendVarint(b, uint64(o.AppendAction))
			}
		}
		for _, k := range hm.RemoveHeaders {
			b = protowire.AppendTag(b, hmRemoveHeaders, protowire.BytesType)
			b = protowire.AppendString(b, k)
		}
	}
	if bm := cr.BodyMutation; bm != nil {
		k, _ := bodyMutationSize(bm)
		b = protowire.AppendTag(b, crBodyMutation, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(k))
		switch m := bm.Mutation.(type) {
		case *extprocv3.BodyMutation_Body:
			b = protowire.AppendTag(b, bmBody, protowire.BytesType)
			b = protowire.AppendBytes(b, m.Body)
		case *extprocv3.BodyMutation_StreamedResponse:
			b = protowire.AppendTag(b, bmStreamed, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(streamedSize(m.StreamedResponse)))
			if s := m.StreamedResponse; len(s.Body) > 0 {
				b = protowire.AppendTag(b, sbrBody, protowire.BytesType)
				b = protowire.AppendBytes(b, s.Body)
			}
			if m.StreamedResponse.EndOfStream {
				b = protowire.AppendTag(b, sbrEnd, protowire.VarintType)
				b = protowire.AppendVarint(b, 1)
			}
		}
	}
	if cr.ClearRouteCache {
		b = protowire.AppendTag(b, crClearRoute, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	return b
}

func mutationSize(hm *extprocv3.HeaderMutation) (n int, ok bool) {
	for _, o := range hm.SetHeaders {
		k, ok := optionSize(o)
		if !ok {
			return 0, false
		}
		n += protowire.SizeTag(hmSetHeaders) + protowire.SizeBytes(k)
	}
	for _, k := range hm.RemoveHeaders {
		n += protowire.SizeTag(hmRemoveHeaders) + protowire.SizeBytes(len(k))
	}
	return n, true
}

func optionSize(o *corev3.HeaderValueOption) (n int, ok bool) {
	//nolint:staticcheck // as in appendReply: the deprecated append, when set, is protobuf's to encode
	if o == nil || o.Append != nil || o.KeepEmptyValue || (o.Header != nil && o.Header.Value != "") {
		return 0, false
	}
	if o.Header != nil {
		n += protowire.SizeTag(hvoHeader) + protowire.SizeBytes(headerSize(o.Header))
	}
	if o.AppendAction != 0 {
		n += protowire.SizeTag(hvoAppendAction) + protowire.SizeVarint(uint64(o.AppendAction))
	}
	return n, true
}

func headerSize(h *corev3.HeaderValue) (n int) {
	if h.Key != "" {
		n += protowire.SizeTag(hvKey) + protowire.SizeBytes(len(h.Key))
	}
	if len(h.RawValue) > 0 {
		n += protowire.SizeTag(hvRawValue) + protowire.SizeBytes(len(h.RawValue))
	}
	return n
}

func bodyMutationSize(bm *extprocv3.BodyMutation) (n int, ok bool) {
	switch m := bm.Mutation.(type) {
	case *extprocv3.BodyMutation_Body:
		if len(m.Body) >= largeBody {
			return 0, false // marshalBodyResponse sends it without a copy
		}
		// A oneof member is written even when empty.
		return protowire.SizeTag(bmBody) + protowire.SizeBytes(len(m.Body)), true
	case *extprocv3.BodyMutation_StreamedResponse:
		s := m.StreamedResponse
		if s == nil || s.EndOfStreamWithoutMessage || s.GrpcMessageCompressed || s.DrainComplete {
			return 0, false
		}
		return protowire.SizeTag(bmStreamed) + protowire.SizeBytes(streamedSize(s)), true
	}
	return 0, false
}

func streamedSize(s *extprocv3.StreamedBodyResponse) (n int) {
	if len(s.Body) > 0 {
		n += protowire.SizeTag(sbrBody) + protowire.SizeBytes(len(s.Body))
	}
	if s.EndOfStream {
		n += protowire.SizeTag(sbrEnd) + 1
	}
	return n
}
