package jsontext

import (
	"fmt"
	"strings"
	"testing"
)

// tokens runs a Tokenizer over text cut into chunks of size n (0: whole),
// each a copy overwritten after use, and renders its tokens (kind, offset,
// contents) and its error.
func tokens(text []byte, lim Limits, n int) string {
	if n <= 0 {
		n = max(len(text), 1)
	}
	var t Tokenizer
	t.Reset(lim)
	var b strings.Builder
	put := func(tok Token) {
		fmt.Fprintf(&b, "%d@%d", tok.Kind, tok.Off)
		switch tok.Kind {
		case Key, StringValue:
			fmt.Fprintf(&b, "%q", tok.Str)
		case NumberValue:
			fmt.Fprintf(&b, "=%v", tok.Num.Float64())
		}
		b.WriteByte(' ')
	}
	for off := 0; off < len(text) && t.Err() == nil; off += n {
		chunk := []byte(string(text[off:min(off+n, len(text))]))
		for p := 0; ; {
			tok, q := t.Next(chunk, p)
			if tok.Kind == NeedMore {
				break
			}
			put(tok)
			p = q
		}
		clear(chunk)
		t.EndChunk(len(chunk))
	}
	for tok, ok := t.End(); ok; tok, ok = t.End() {
		put(tok)
	}
	fmt.Fprintf(&b, "done=%v err=%v", t.Done(), t.Err())
	return b.String()
}

// TestTokenizerChunks: a text cut anywhere gives the tokens and the error
// it gives whole, offsets included, and the error Pull reports.
func TestTokenizerChunks(t *testing.T) {
	texts := []string{
		`{"a": [1, 2.5e3, -0, "x\u00e9\n", true, false, null], "b": {"c": {}, "d": [[], [[]]]}} trailing`,
		"\xEF\xBB\xBF [NaN, -Infinity, 1e400, 18446744073709551616, \"\\ud83d\\ude00\"]",
		`{"k\"ey": "` + strings.Repeat("long ", 40) + `", "n": 12345678901234567890.123e-5}`,
		`[1 2]`, `{"a":1,}`, `[tru]`, `["a\qb"]`, "[\"a\tb\"]", `{"a" 1}`, `[1, {"b": [2,`, `"unterminated`,
		"[1\x00]", `[[[[[[1]]]]]]`, `[0, 0, 0, 0, 0, 0, 0, 0]`, `5`, ` `, ``,
	}
	lim := Limits{MaxDepth: 5, MaxValues: 8}
	for _, text := range texts {
		want := tokens([]byte(text), lim, 0)
		for _, n := range []int{1, 2, 3, 7} {
			if got := tokens([]byte(text), lim, n); got != want {
				t.Errorf("%q in chunks of %d:\n got %s\nwant %s", text, n, got, want)
			}
		}
		pullErr := "<nil>"
		if err := readErr(text, lim); err != nil {
			pullErr = err.Error()
		}
		if tokErr := want[strings.LastIndex(want, "err=")+4:]; tokErr != pullErr {
			t.Errorf("%q: Pull says %s, the tokenizer %s", text, pullErr, tokErr)
		}
	}
}
