package extproc

import (
	"unicode/utf8"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The field numbers unmarshalHeaders reads, from the descriptors.
var (
	prRequestHeaders  = fieldNumber(&extprocv3.ProcessingRequest{}, "request_headers")
	prResponseHeaders = fieldNumber(&extprocv3.ProcessingRequest{}, "response_headers")
	hhHeaders         = fieldNumber(&extprocv3.HttpHeaders{}, "headers")
	hhEndOfStream     = fieldNumber(&extprocv3.HttpHeaders{}, "end_of_stream")
	hmapHeaders       = fieldNumber(&corev3.HeaderMap{}, "headers")
	hvValue           = fieldNumber(&corev3.HeaderValue{}, "value")
)

// unmarshalHeaders decodes buf, a ProcessingRequest that carries request
// or response headers, into r the way protobuf does, with the headers'
// messages in one slab and their keys and values aliasing buf (which
// nothing else may hold or change): protobuf allocates three objects per
// header, and Envoy sends a dozen headers twice per exchange. ok is false
// for any other message, and for anything unusual in one (a field of
// HttpHeaders or HeaderValue not read here, a repeated submessage, a
// string that is not UTF-8): protobuf decodes those.
func unmarshalHeaders(buf []byte, r *extprocv3.ProcessingRequest) (ok bool, err error) {
	field, hb, rest, err := splitOneof(buf, prRequestHeaders, prResponseHeaders)
	if err != nil || field == 0 {
		return false, nil
	}
	h := &extprocv3.HttpHeaders{}
	var mapBytes []byte
	seenMap := false
	for b := hb; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false, nil
		}
		b = b[n:]
		switch {
		case num == hhHeaders && typ == protowire.BytesType && !seenMap:
			seenMap = true
			if mapBytes, n = protowire.ConsumeBytes(b); n < 0 {
				return false, nil
			}
		case num == hhEndOfStream && typ == protowire.VarintType:
			var v uint64
			if v, n = protowire.ConsumeVarint(b); n < 0 {
				return false, nil
			}
			h.EndOfStream = v != 0
		default:
			return false, nil
		}
		b = b[n:]
	}
	if seenMap {
		if h.Headers, ok = decodeHeaderMap(mapBytes); !ok {
			return false, nil
		}
	}
	if err := proto.Unmarshal(rest, r); err != nil {
		return true, err
	}
	if r.Request != nil {
		// Another member of the oneof too: protobuf's order decides.
		return false, nil
	}
	if field == prRequestHeaders {
		r.Request = &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: h}
	} else {
		r.Request = &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: h}
	}
	return true, nil
}

// decodeHeaderMap decodes a HeaderMap's bytes: its headers in one slab,
// keys and values aliasing b.
func decodeHeaderMap(b []byte) (*corev3.HeaderMap, bool) {
	count := 0
	for p := b; len(p) > 0; {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 || num != hmapHeaders || typ != protowire.BytesType {
			return nil, false
		}
		_, m := protowire.ConsumeBytes(p[n:])
		if m < 0 {
			return nil, false
		}
		count++
		p = p[n+m:]
	}
	hm := &corev3.HeaderMap{}
	if count == 0 {
		return hm, true
	}
	slab := make([]corev3.HeaderValue, count)
	hm.Headers = make([]*corev3.HeaderValue, count)
	for i := range slab {
		_, _, n := protowire.ConsumeTag(b)
		v, m := protowire.ConsumeBytes(b[n:])
		if !decodeHeaderValue(v, &slab[i]) {
			return nil, false
		}
		hm.Headers[i] = &slab[i]
		b = b[n+m:]
	}
	return hm, true
}

// decodeHeaderValue decodes one HeaderValue's bytes into hv.
func decodeHeaderValue(b []byte, hv *corev3.HeaderValue) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return false
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return false
		}
		switch num {
		case hvKey, hvValue:
			if !utf8.Valid(v) {
				return false
			}
			s := ""
			if len(v) > 0 {
				s = unsafe.String(&v[0], len(v))
			}
			if num == hvKey {
				hv.Key = s
			} else {
				hv.Value = s
			}
		case hvRawValue:
			hv.RawValue = nil
			if len(v) > 0 {
				hv.RawValue = v[:len(v):len(v)]
			}
		default:
			return false
		}
		b = b[n+m:]
	}
	return true
}

// isHeaders reports a message that carries request or response
// headers, without gathering it: a message in one buffer (a small one
// arrives in one frame) is looked through, another is judged by its
// first field (Envoy writes its fields in field-number order, the headers
// first; Go's protobuf writes the oneof last).
func isHeaders(data mem.BufferSlice) bool {
	if len(data) == 1 {
		for b := data[0].ReadOnlyData(); len(b) > 0; {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				return false
			}
			if typ == protowire.BytesType && (num == prRequestHeaders || num == prResponseHeaders) {
				return true
			}
			m := protowire.ConsumeFieldValue(num, typ, b[n:])
			if m < 0 {
				return false
			}
			b = b[n+m:]
		}
		return false
	}
	for _, d := range data {
		if b := d.ReadOnlyData(); len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			return n > 0 && typ == protowire.BytesType && (num == prRequestHeaders || num == prResponseHeaders)
		}
	}
	return false
}
