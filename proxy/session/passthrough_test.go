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
