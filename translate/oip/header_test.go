package oip

import (
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

func TestParseHeaderLength(t *testing.T) {
	cases := []struct {
		value   string
		bodyLen int
		want    int
		ok      bool
	}{
		{"306", 312, 306, true},
		{"312", 312, 312, true},
		{" 17\t", 20, 17, true},
		{"0", 10, 0, false},    // raw binary: never requested
		{"313", 312, 0, false}, // beyond the body
		{"", 10, 0, false},
		{"-1", 10, 0, false},
		{"+5", 10, 0, false},
		{"1e2", 1000, 0, false},
		{"0x10", 100, 0, false},
		{"99999999999999999999999", 10, 0, false},
		{"1 2", 20, 0, false},
	}
	for _, tc := range cases {
		got, err := ParseHeaderLength(tc.value, tc.bodyLen)
		if !tc.ok {
			wantAPIErr(t, err, apierr.BadGateway)
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseHeaderLength(%q, %d) = %d, %v; want %d", tc.value, tc.bodyLen, got, err, tc.want)
		}
	}
}
