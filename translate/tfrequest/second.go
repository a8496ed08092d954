package tfrequest

import "github.com/tfsbridge/tfsbridge/translate/jsontext"

// A second look at the text settles the bodies ErrUndecided lists when
// the caller holds it: a whole body (Parse), which a streamed body within
// the replay size becomes once a stream cannot tell (translate's
// RequestStream). Only streams beyond the replay size keep the 400.
//
//   - "signature_name" after the values, naming other inputs: Parse reads
//     the body again with that name resolved first.
//   - an object whose first key is "b64" while an input has that name:
//     b64Ahead looks ahead in the text to tell {"b64": "…"} (a value) from
//     an object of named inputs, as TF's IsValBase64Object does.
//   - named "inputs" that together exceed the element limit:
//     replayInputs (decoder_lex.go: the lexer run again) reads their
//     values again in signature order, TF's.
//   - a long number cut by a chunk boundary: a whole body has none.

// b64Ahead reports whether the object whose first key, "b64", ends at
// d.keyEnd in the whole body is exactly {"b64": "<string>"}. A body
// malformed there fails on its syntax, whatever this answers.
func (d *Decoder) b64Ahead() bool {
	b := d.body
	p := jsontext.SkipSpace(b, d.keyEnd)
	if p == len(b) || b[p] != ':' {
		return false
	}
	if p = jsontext.SkipSpace(b, p+1); p == len(b) || b[p] != '"' {
		return false
	}
	for p++; p < len(b) && b[p] != '"'; p++ {
		if b[p] == '\\' {
			p++
		}
	}
	p = jsontext.SkipSpace(b, p+1)
	return p < len(b) && b[p] == '}'
}
