package tfjson

import "testing"

func TestBase64(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"", "", true},
		{"aGVsbG8=", "hello", true},
		{"aGVsbG8", "hello", true},
		{"aGVsbG8.", "hello", true},
		{"aGVs bG8\n=", "hello", true},
		{" a G V s b G 8 = ", "hello", true},
		{"aGVsbA==", "hell", true},
		{"aGVsbA", "hell", true},
		{"aGVsbA=", "", false},
		{"aGVsbA===", "", false},
		{"aGVsbA=.", "hell", true},
		{"aGVsbG9=", "hello", true}, // unused low bits are not checked
		{"aGVsbG8==", "", false},
		{"aGVsb", "", false},
		{"YWJj", "abc", true},
		{"YWJj=", "", false},
		{"a-b_", "", false},
		{"aGk=aGk=", "", false},
		{"aGk\x00", "", false},
		{"+/+/", "\xfb\xff\xbf", true},
	}
	for _, tt := range tests {
		got, ok := AppendBase64(nil, []byte(tt.in))
		if ok != tt.ok || (ok && string(got) != tt.want) {
			t.Errorf("%q: %q %v, want %q %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
