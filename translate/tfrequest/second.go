package tfrequest

import "github.com/tfsbridge/tfsbridge/translate/jsontext"

// The second look at the text that settles the bodies ErrUndecided lists
// (with Parse's second reading and replayInputs): b64Ahead.

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
