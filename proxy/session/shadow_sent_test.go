package session

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/shadow"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// The tee hands the copy the primary's v2 request (shadow.Sent), the
// bytes sent upstream: by reference when the session never gives them
// back (a whole body, one held in its frames), copied at the hand-off
// when they are pooled (a streamed body) and only while the session
// still holds them (a small one is taken at Close, before it gives them
// back); and the primary's v2 answer with its header length,
// whole or streamed. A copy to TF Serving, which sends the client's TF
// request, gets none of that.
func TestShadowTeeSent(t *testing.T) {
	const reqBody = `{"instances": [1.0, 2.0, 5.0]}`
	binHeader := `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	binOK := append([]byte(binHeader), f32le(2.5, 3, 4.5)...)
	for _, tc := range []struct {
		name       string
		chunk      int  // 0: whole bodies; -1: the request whole in parts; else streamed in pieces of chunk bytes
		closed     bool // the session released its request before the hand-off
		atClose    bool // ... after Close took its bytes (the reverse proxy's hand-off)
		tf         bool // the shadow server is TF Serving
		wantSent   bool
		wantAnswer bool
	}{
		{name: "whole", chunk: 0, wantSent: true, wantAnswer: true},
		{name: "whole in parts", chunk: -1, wantSent: true, wantAnswer: true},
		{name: "streamed", chunk: 7, wantSent: true, wantAnswer: true},
		{name: "streamed, released", chunk: 7, closed: true},
		{name: "streamed, taken at Close", chunk: 7, closed: true, atClose: true, wantSent: true, wantAnswer: true},
		{name: "whole, to TF Serving", chunk: 0, tf: true},
		{name: "whole in parts, to TF Serving", chunk: -1, tf: true},
		{name: "streamed, to TF Serving", chunk: 7, tf: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind := "triton" // no backend: the copy handed over at Close fails, unread here
			if tc.tf {
				kind = shadow.KindTFServing
			}
			e, eng := shadowEnvKind(t, newTFShadow(t, 200, "{}"), 1<<20, kind)
			ctx := context.Background()
			s := New(e.cfg)
			defer s.Close()
			s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", hdr{}, false)
			var (
				a  Action
				v2 []byte
			)
			switch tc.chunk {
			case -1:
				var (
					parts   [][]byte
					release func()
				)
				a, parts, release = s.RequestParts(ctx, [][]byte{[]byte(reqBody[:10]), []byte(reqBody[10:])})
				v2 = append(bytes.Clone(a.Body), bytes.Join(parts, nil)...)
				if release != nil {
					// The adapter's share, once written: the copy's keeps
					// the parts alive.
					defer release()
				}
			case 0:
				a = s.bufferedRequest(ctx, []byte(reqBody))
				v2 = a.Body
			default:
				a = streamRequest(t, s, []byte(reqBody), tc.chunk)
				v2 = a.Body
			}
			if a.Verdict != Continue || len(v2) == 0 {
				t.Fatalf("request: %v %d %s", a.Verdict, a.Status, a.Body)
			}
			rh := hdr{"content-type": "application/octet-stream", "inference-header-content-length": strconv.Itoa(len(binHeader))}
			s.ResponseHeaders(ctx, 200, rh, false)
			if tc.chunk <= 0 {
				a = s.bufferedResponse(ctx, binOK)
			} else {
				a = streamBody(t, s.ResponseChunk, binOK, tc.chunk)
			}
			if a.Verdict != Continue {
				t.Fatalf("response: %v %d %s", a.Verdict, a.Status, a.Body)
			}
			tee := s.shadow
			if !tee.pending {
				t.Fatal("no copy made")
			}
			if tc.atClose {
				tee.takePooledAtClose()
			}
			if tc.closed {
				s.req.close()
			}
			c := *tee.c
			held := c.Reserved
			tee.takePooled(&c)
			defer eng.Release(c.Reserved - held) // what it reserved for this copy of the copy
			if got := c.Sent != nil; got != tc.wantSent {
				t.Fatalf("Sent %v, want %v", got, tc.wantSent)
			}
			if c.Sent == nil {
				if c.Reserved != held {
					t.Errorf("reserved %d, want %d", c.Reserved, held)
				}
				return
			}
			if got := bytes.Join(c.Sent.Body, nil); !bytes.Equal(got, v2) {
				t.Errorf("Sent.Body %q, want the request sent upstream %q", got, v2)
			}
			if c.Sent.SignatureName != "" || c.Sent.Exchange.Signature == nil || c.Sent.Options.ID != s.requestID || c.Sent.ContentType == "" {
				t.Errorf("Sent %+v: want the default signature, its TF signature and the request's options", c.Sent)
			}
			if got := c.Sent.Release != nil; got != (tc.chunk == -1) {
				// Only parts the adapter gives back to their pool have a
				// release, which the copy shares.
				t.Errorf("Sent.Release set %v, want %v", got, tc.chunk == -1)
			}
			if got := c.Sent.Answer != nil; got != tc.wantAnswer {
				t.Fatalf("Sent.Answer %v, want %v", got, tc.wantAnswer)
			}
			if tc.wantAnswer && (!bytes.Equal(c.Sent.Answer, binOK) || c.Sent.AnswerHeaderLength != len(binHeader) || c.Sent.AnswerLimits != e.cfg.Limits) {
				t.Errorf("Sent.Answer %q (header %d), want the v2 answer (header %d)", c.Sent.Answer, c.Sent.AnswerHeaderLength, len(binHeader))
			}
		})
	}
}

// A primary's v2 answer past maxSentAnswer is not kept (the copy
// translates its own answer then), in one piece or several.
func TestShadowTeeV2AnswerBound(t *testing.T) {
	for _, pieces := range [][]int{{maxSentAnswer}, {maxSentAnswer + 1}, {maxSentAnswer / 2, maxSentAnswer/2 + 1, 10}} {
		_, eng := shadowEnv(t, newTFShadow(t, 200, "{}"), 1<<20)
		tee := &shadowTee{eng: eng, c: &shadow.Copy{}, sent: &shadow.Sent{}}
		total := 0
		for _, n := range pieces {
			tee.v2Answer(make([]byte, n), 7, tensor.Limits{})
			total += n
		}
		if kept := tee.sent.Answer != nil; kept != (total <= maxSentAnswer) || (kept && (len(tee.sent.Answer) != total || tee.sent.AnswerHeaderLength != 7)) {
			t.Errorf("pieces %v: kept %d bytes, header length %d", pieces, len(tee.sent.Answer), tee.sent.AnswerHeaderLength)
		}
		eng.Release(tee.c.Reserved)
	}
}
