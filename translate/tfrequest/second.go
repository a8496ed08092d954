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
//     replayInputs reads their values again in signature order, TF's.
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

// replayInputs reads the values of the named "inputs" object that just
// closed again, in signature order, with the element limit counted from
// zero: which input meets the limit first, and so which error TF reports,
// depends on that order. Each value is read by a tokenizer of its own
// (the text around it was read already); the root dump, already fed, is
// paused.
func (d *Decoder) replayInputs() {
	root := &d.dumps[dumpRoot]
	rootOn, tz := root.on, d.tz
	if rootOn {
		d.dumpStop(dumpRoot)
	}
	d.replaying, d.total = true, 0
	d.colErrs, d.colTrip = nil, false
	d.stack = append(d.stack, opFrame{obj: true, role: roleInputs})
	base := len(d.stack)
	for i := range d.ins {
		in := &d.ins[i]
		if !in.used {
			continue // missing: closeInputs says so in order
		}
		in.data, in.strs = in.data[:0], in.strs[:0]
		d.stack[base-1].next, d.stack[base-1].nextInput = slotItem, int32(i)
		d.tz = jsontext.Tokenizer{}
		d.tz.Reset(jsontext.Limits{MaxDepth: d.lim.MaxDepth})
		d.lex(d.body, in.from, base)
	}
	d.stack = d.stack[:base-1]
	d.replaying, d.tz = false, tz
	if rootOn {
		root.on = true
		d.ndump++
	}
}
