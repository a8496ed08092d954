package jsontext

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// FuzzReader: no input panics; errors are *SyntaxError with an offset
// inside the input, and only valid JSON rapidjson refuses is refused; a
// dump is a prefix of the whole rendering. (internal/jsontape's FuzzTape
// compares structures with encoding/json.)
func FuzzReader(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5e3, -0, "x\u00e9\n"], "b": {"c": null, "d": [true, false]}}`,
		`[NaN, -Infinity, 1e400, 18446744073709551616]`, `"\ud83d\ude00"`, "\xEF\xBB\xBF{}", `[[[[]]]]`, `{"a":1,"a":2}`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	lim := ForElements(32, 1<<12)
	f.Fuzz(func(t *testing.T, data []byte) {
		err := readErr(string(data), lim)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(data) || se.Msg == "" {
				t.Fatalf("bad error %#v", err)
			}
			// Valid JSON is only refused for rapidjson's exponent bound, a
			// lone high surrogate, or our limits.
			if json.Valid(data) && se.Msg != msgNumberTooBig && se.Msg != msgSurrogateInvalid && se.Msg != msgTooDeep && se.Msg != msgTooManyVals {
				t.Fatalf("valid JSON %q refused: %v", data, err)
			}
			return
		}
		checkDump(t, string(data))
		var p Pull
		p.Reset(data, lim)
		for tok, ok := p.Next(); ok; tok, ok = p.Next() {
			if tok.Kind == Key || tok.Kind == StringValue {
				if n, q := quotedLen(tok.Str), AppendString(nil, tok.Str); n != len(q) {
					t.Fatalf("quotedLen %d for %q", n, q)
				}
			}
		}
	})
}

// checkDump: a dump is the whole rendering cut at a token boundary, and it
// is only cut once it has reached DumpLimit bytes.
func checkDump(t *testing.T, text string) {
	got := Dump(text)
	full := string(appendDump(nil, text, math.MaxInt))
	if !strings.HasPrefix(full, got) {
		t.Fatalf("dump %q is not a prefix of the rendering %q", got, full)
	}
	if len(got) < len(full) && len(got) < DumpLimit {
		t.Fatalf("dump %q cut at %d bytes, under the limit", got, len(got))
	}
}
