package session

import "testing"

func TestPassthroughText(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Passthrough
	}{{"none", PassthroughNone}, {"inference", PassthroughInference}, {"all", PassthroughAll}} {
		var p Passthrough = 99
		if err := p.UnmarshalText([]byte(tc.text)); err != nil || p != tc.want {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", tc.text, p, err, tc.want)
		}
		if b, _ := p.MarshalText(); string(b) != tc.text {
			t.Errorf("MarshalText(%v) = %q; want %q", p, b, tc.text)
		}
	}
	for _, bad := range []string{"", "ALL", "inference ", "v2"} {
		var p Passthrough
		if err := p.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("UnmarshalText(%q) succeeded", bad)
		}
	}
	if Passthrough(0) != PassthroughInference {
		t.Error("the zero value is not the default policy")
	}
	if got := Passthrough(7).String(); got != "Passthrough(7)" {
		t.Errorf("String() = %q", got)
	}
}

// TestPassthroughDropsServerHeader: a pass-through request carrying the
// model map's routing header loses it (and Envoy re-picks the route), so a
// client cannot steer a native v2 call to another server's cluster.
func TestPassthroughDropsServerHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    hdr
		want bool
	}{
		{"client header", hdr{"x-tfsbridge-server": "onnx"}, true},
		{"no header", hdr{}, false},
	} {
		s := New(&Config{})
		a := s.RequestHeaders(t.Context(), "GET", "/v2/models/m", tc.h, true)
		if a.Verdict != PassThrough {
			t.Fatalf("%s: verdict %v", tc.name, a.Verdict)
		}
		removed := len(a.Remove) == 1 && a.Remove[0] == HeaderServer
		if removed != tc.want || a.ClearRouteCache != tc.want {
			t.Errorf("%s: remove %v, clear_route_cache %v; want both %v", tc.name, a.Remove, a.ClearRouteCache, tc.want)
		}
	}
}
