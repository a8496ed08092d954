package oip

import (
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

func TestParseServerKind(t *testing.T) {
	cases := []struct {
		in   string
		want ServerKind
		ok   bool
	}{
		{"triton", Triton, true},
		{"KServe", KServe, true},
		{" mlserver ", MLServer, true},
		{"", 0, false},
		{"torchserve", 0, false},
	}
	for _, tc := range cases {
		got, err := ParseServerKind(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseServerKind(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != map[ServerKind]string{Triton: "triton", KServe: "kserve", MLServer: "mlserver"}[got] {
			t.Errorf("String() = %q", got.String())
		}
	}
	if s := ServerKind(7).String(); s != "ServerKind(7)" {
		t.Errorf("String of unknown kind = %q", s)
	}
	var zero ServerKind
	if zero != Triton {
		t.Error("the zero ServerKind must be Triton")
	}
}

func TestKindFromServerMetadata(t *testing.T) {
	cases := []struct {
		body string
		want ServerKind
		ok   bool
	}{
		// Bodies of GET /v2 as the three servers send them (docs/open-inference-protocol.md §2).
		{`{"name":"triton","version":"2.50.0","extensions":["classification","sequence","model_repository","binary_tensor_data"]}`, Triton, true},
		{`{"name":"kserve","version":"0.14.0","extensions":["model_repository_extension"]}`, KServe, true},
		{`{"name":"mlserver","version":"1.6.1","extensions":[]}`, MLServer, true},
		{`{"name":"Triton"}`, Triton, true},
		{`{"name":"torchserve"}`, 0, false},
		{`{"version":"1"}`, 0, false},
		{`{"name":3}`, 0, false},
		{`[1]`, 0, false},
		{``, 0, false},
		{`<html>Not Found</html>`, 0, false},
	}
	for _, tc := range cases {
		got, err := KindFromServerMetadata([]byte(tc.body))
		if tc.ok {
			if err != nil || got != tc.want {
				t.Errorf("%s: got %v, %v; want %v", tc.body, got, err, tc.want)
			}
			continue
		}
		wantAPIErr(t, err, apierr.BadGateway)
	}
}
