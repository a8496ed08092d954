package envoysim

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func raw(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)}}
}

func appended(k, v string) *corev3.HeaderValueOption {
	o := raw(k, v)
	o.Append = wrapperspb.Bool(true) //nolint:staticcheck // the deprecated field is the one ext_proc honours
	return o
}

func baseRequestMap() *headerMap {
	h := &headerMap{}
	for _, kv := range [][2]string{
		{":authority", "example"}, {":path", "/v1/models/m:predict"}, {":method", "POST"}, {":scheme", "http"},
		{"content-type", "application/json"}, {"content-length", "12"}, {"x-custom", "a"},
	} {
		h.add(kv[0], kv[1])
	}
	return h
}

func flat(h *headerMap) string {
	parts := make([]string, 0, len(h.entries))
	for _, e := range h.entries {
		parts = append(parts, e.key+"="+e.value)
	}
	return strings.Join(parts, " ")
}

func TestApplyHeaderMutation(t *testing.T) {
	tests := []struct {
		name        string
		m           *extprocv3.HeaderMutation
		replacing   bool
		skipCL      bool
		want        string // resulting map
		wantIgnored int
		wantEmptied []string
		wantNotes   int
		wantErr     string
	}{
		{
			name: "set path and a new header",
			m:    &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{raw(":path", "/v2/models/m/infer"), raw("X-New", "1")}},
			want: ":authority=example :method=POST :scheme=http :path=/v2/models/m/infer content-type=application/json content-length=12 x-custom=a x-new=1",
		},
		{
			name: "overwrite by default, append only with append=true",
			m:    &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{raw("content-type", "application/octet-stream"), appended("x-custom", "b")}},
			want: ":authority=example :path=/v1/models/m:predict :method=POST :scheme=http content-length=12 x-custom=a content-type=application/octet-stream x-custom=b",
		},
		{
			name:      "append_action is ignored: overwrite, with a note",
			m:         &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-custom", RawValue: []byte("b")}, AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT}}},
			want:      ":authority=example :path=/v1/models/m:predict :method=POST :scheme=http content-type=application/json content-length=12 x-custom=b",
			wantNotes: 1,
		},
		{
			name:        "routing and x-envoy headers are ignored and counted",
			m:           &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{raw("host", "h"), raw(":authority", "h"), raw(":method", "GET"), raw(":scheme", "https"), raw("x-envoy-foo", "1")}},
			want:        flat(baseRequestMap()),
			wantIgnored: 5,
		},
		{
			name:      "CONTINUE_AND_REPLACE may change :method",
			m:         &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{raw(":method", "PUT")}},
			replacing: true,
			want:      ":authority=example :path=/v1/models/m:predict :scheme=http :method=PUT content-type=application/json content-length=12 x-custom=a",
		},
		{
			name:        "appending to a pseudo-header is ignored",
			m:           &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{appended(":path", "/x")}},
			want:        flat(baseRequestMap()),
			wantIgnored: 1,
		},
		{
			name:        "remove: pseudo-headers, host and x-envoy stay",
			m:           &extprocv3.HeaderMutation{RemoveHeaders: []string{":path", "host", "x-envoy-upstream-service-time", "X-Custom"}},
			want:        ":authority=example :path=/v1/models/m:predict :method=POST :scheme=http content-type=application/json content-length=12",
			wantIgnored: 3,
		},
		{
			name:        "value-only header is set empty",
			m:           &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-v", Value: "lost"}}}},
			want:        flat(baseRequestMap()) + " x-v=",
			wantEmptied: []string{"x-v"},
		},
		{
			name:    "value and raw_value both set",
			m:       &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-v", Value: "a", RawValue: []byte("a")}}}},
			want:    flat(baseRequestMap()),
			wantErr: "Only one of value or raw_value in the HeaderValue message should be set.",
		},
		{
			name:    "invalid value character",
			m:       &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{raw("x-v", "a\r\nb")}},
			want:    flat(baseRequestMap()),
			wantErr: "Invalid character in set_headers mutation.",
		},
		{
			name:    "invalid name",
			m:       &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{raw("bad name", "a")}},
			want:    flat(baseRequestMap()),
			wantErr: "Invalid character in set_headers mutation.",
		},
		{
			name:    "invalid remove name",
			m:       &extprocv3.HeaderMutation{RemoveHeaders: []string{"bad\nname"}},
			want:    flat(baseRequestMap()),
			wantErr: "Invalid character in remove_headers mutation.",
		},
		{
			name:   "content-length sets dropped when Envoy strips it",
			m:      &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{raw("Content-Length", "5")}},
			skipCL: true,
			want:   flat(baseRequestMap()),
		},
		{
			name:        ":status below 200 is ignored",
			m:           &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{raw(":status", "100")}},
			want:        flat(baseRequestMap()),
			wantIgnored: 1,
		},
		{
			name: "too many entries",
			m: func() *extprocv3.HeaderMutation {
				m := &extprocv3.HeaderMutation{}
				for i := 0; i <= maxHeadersCount; i++ {
					m.SetHeaders = append(m.SetHeaders, raw(fmt.Sprintf("x-%d", i), "v"))
				}
				return m
			}(),
			want:    flat(baseRequestMap()),
			wantErr: "Header mutation remove header count 0 or set header count 101 exceed the HCM header countlimit 100",
		},
		{
			name:    "result too large",
			m:       &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{raw("x-big", strings.Repeat("a", maxHeadersKB*1024))}},
			want:    flat(baseRequestMap()) + " x-big=" + strings.Repeat("a", maxHeadersKB*1024),
			wantErr: "exceeding the count limit 100 or the size limit 60 kilobytes",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := baseRequestMap()
			res, err := applyHeaderMutation(h, tc.m, tc.replacing, tc.skipCL)
			if tc.wantErr != "" {
				var me mutationError
				if !errors.As(err, &me) || !strings.Contains(me.details, tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if got := flat(h); got != tc.want {
				t.Errorf("headers\n got %s\nwant %s", got, tc.want)
			}
			if tc.wantErr == "" && len(res.ignored) != tc.wantIgnored {
				t.Errorf("ignored = %q, want %d entries", res.ignored, tc.wantIgnored)
			}
			if !reflect.DeepEqual(res.emptied, tc.wantEmptied) {
				t.Errorf("emptied = %q, want %q", res.emptied, tc.wantEmptied)
			}
			if len(res.notes) != tc.wantNotes {
				t.Errorf("notes = %q, want %d", res.notes, tc.wantNotes)
			}
		})
	}
}

func TestCheckContentLength(t *testing.T) {
	withCL := func(v string) *headerMap { h := &headerMap{}; h.add("content-length", v); return h }
	body := func(s string) *extprocv3.BodyMutation {
		return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(s)}}
	}
	clearBody := &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}
	tests := []struct {
		name    string
		h       *headerMap
		m       *extprocv3.BodyMutation
		wantErr bool
	}{
		{"matching", withCL("3"), body("abc"), false},
		{"stale", withCL("17"), body("abc"), true},
		{"no content-length", &headerMap{}, body("abc"), false},
		{"headers not held", nil, body("abc"), false},
		{"unparseable is accepted", withCL("x"), body("abc"), false},
		{"clear_body needs 0", withCL("3"), clearBody, true},
		{"clear_body with 0", withCL("0"), clearBody, false},
		{"empty mutation counts as 0", withCL("3"), &extprocv3.BodyMutation{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkContentLength(tc.h, tc.m)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && err.Error() != "mismatch between content length and the length of the mutated body" {
				t.Errorf("details = %q", err)
			}
		})
	}
}

func TestApplyBodyMutation(t *testing.T) {
	orig := []byte("orig")
	tests := []struct {
		name string
		m    *extprocv3.BodyMutation
		want string
	}{
		{"replace", &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte("new")}}, "new"},
		{"clear", &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}, ""},
		{"clear false keeps", &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: false}}, "orig"},
		{"no oneof keeps", &extprocv3.BodyMutation{}, "orig"},
		{"streamed_response keeps", &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{Body: []byte("x")}}}, "orig"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(applyBodyMutation(orig, tc.m)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEffectiveModeOverride(t *testing.T) {
	cfg := DefaultMode()
	tests := []struct {
		name     string
		override *extprocfilterv3.ProcessingMode
		wantReq  extprocfilterv3.ProcessingMode_BodySendMode
		wantResp extprocfilterv3.ProcessingMode_BodySendMode
		wantRH   extprocfilterv3.ProcessingMode_HeaderSendMode
	}{
		{"request body only also clears the response body", &extprocfilterv3.ProcessingMode{RequestBodyMode: extprocfilterv3.ProcessingMode_NONE},
			extprocfilterv3.ProcessingMode_NONE, extprocfilterv3.ProcessingMode_NONE, extprocfilterv3.ProcessingMode_SEND},
		{"both explicit", &extprocfilterv3.ProcessingMode{RequestBodyMode: extprocfilterv3.ProcessingMode_NONE, ResponseBodyMode: extprocfilterv3.ProcessingMode_BUFFERED},
			extprocfilterv3.ProcessingMode_NONE, extprocfilterv3.ProcessingMode_BUFFERED, extprocfilterv3.ProcessingMode_SEND},
		{"header mode SKIP taken", &extprocfilterv3.ProcessingMode{ResponseHeaderMode: extprocfilterv3.ProcessingMode_SKIP, RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED},
			extprocfilterv3.ProcessingMode_BUFFERED, extprocfilterv3.ProcessingMode_NONE, extprocfilterv3.ProcessingMode_SKIP},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := effectiveModeOverride(tc.override, cfg)
			if got.GetRequestBodyMode() != tc.wantReq || got.GetResponseBodyMode() != tc.wantResp || got.GetResponseHeaderMode() != tc.wantRH {
				t.Errorf("got %v", got)
			}
			if got.GetRequestHeaderMode() != extprocfilterv3.ProcessingMode_SEND {
				t.Errorf("request header mode changed: %v", got)
			}
		})
	}
	if cfg.GetRequestBodyMode() != extprocfilterv3.ProcessingMode_BUFFERED {
		t.Error("configured mode was modified")
	}
}

func TestHeaderMapPseudoFirst(t *testing.T) {
	h := &headerMap{}
	h.add("a", "1")
	h.add(":status", "200")
	h.add("b", "2")
	h.add(":x", "y")
	h.set("a", "3")
	if got, want := flat(h), ":status=200 :x=y b=2 a=3"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	p := h.proto()
	if len(p.Headers) != 4 || p.Headers[0].GetValue() != "" || string(p.Headers[0].GetRawValue()) != "200" {
		t.Errorf("proto = %v", p)
	}
}

func TestValidHeaderName(t *testing.T) {
	for name, want := range map[string]bool{
		"content-type": true, "X-Mixed": true, ":path": true, ":Path": false, ":": false,
		"": false, "bad name": false, "a\x00": false, "x-ok_1.2~": true,
	} {
		if got := validHeaderName(name); got != want {
			t.Errorf("validHeaderName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestConfigNormalized(t *testing.T) {
	ok := Config{ProcessorAddr: "127.0.0.1:1", Upstream: "http://127.0.0.1:2"}
	got, u, err := ok.normalized()
	if err != nil {
		t.Fatal(err)
	}
	if got.MessageTimeout != DefaultMessageTimeout || got.BufferLimit != DefaultBufferLimit || got.UpstreamTimeout != DefaultUpstreamTimeout || got.StatusOnError != 500 || u.Host != "127.0.0.1:2" {
		t.Errorf("defaults not applied: %+v", got)
	}
	bad := []struct {
		name string
		mut  func(*Config)
	}{
		{"no processor", func(c *Config) { c.ProcessorAddr = "" }},
		{"https upstream", func(c *Config) { c.Upstream = "https://x" }},
		{"streamed", func(c *Config) {
			c.Mode = DefaultMode()
			c.Mode.RequestBodyMode = extprocfilterv3.ProcessingMode_STREAMED
		}},
		{"full duplex", func(c *Config) {
			c.Mode = DefaultMode()
			c.Mode.ResponseBodyMode = extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
		}},
		{"buffered partial", func(c *Config) {
			c.Mode = GRPCMode()
			c.Mode.ResponseBodyMode = extprocfilterv3.ProcessingMode_BUFFERED_PARTIAL
		}},
		{"status_on_error", func(c *Config) { c.StatusOnError = 99 }},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mut(&c)
			if _, _, err := c.normalized(); err == nil {
				t.Error("accepted")
			}
		})
	}
}
