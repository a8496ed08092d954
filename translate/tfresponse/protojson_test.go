package tfresponse

import "testing"

func TestProtoString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain/ascii", `"plain/ascii"`},
		{"a<b>&c", `"a\u003cb\u003e&c"`},
		{"\"\\\b\f\n\r\t", `"\"\\\b\f\n\r\t"`},
		{"\x00\x1f\x7f", `"\u0000\u001f\u007f"`},
		{"é ü 日本", `"é ü 日本"`},
		{"\u00ad\u2028\u202e\ufeff\u0600", `"\u00ad\u2028\u202e\ufeff\u0600"`},
		{"\U0001D173\U000E0001", `"\ud834\udd73\udb40\udc01"`},
		{"\U0001F600", "\"\U0001F600\""},
		{"\xff!", `" !"`},                    // invalid lead byte: one space
		{"\xc3(x", `" x"`},                   // bad continuation: both bytes become one space
		{"ab\xe6\x97", `"ab "`},              // truncated sequence
		{"\xf4\x90\x80\x80", `" "`},          // above U+10FFFF
		{"\xed\xa0\x80", "\"\xed\xa0\x80\""}, // surrogate: protobuf does not check
		{"\ufffd", "\"\ufffd\""},             // a real U+FFFD is kept
	}
	for _, c := range cases {
		if got := string(appendProtoString(nil, c.in)); got != c.want {
			t.Errorf("appendProtoString(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}
