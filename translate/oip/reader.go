package oip

import (
	"slices"
	"sync"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
)

// reader pulls the tokens of a JSON text held whole from jsontext's push
// tokenizer (rapidjson's syntax, errors and bounds): the response decoder
// reads with it in one pass, building no tape.
type reader struct {
	tz    *jsontext.Tokenizer
	buf   []byte
	p     int  // offset after the last token
	ended bool // buf is read: only a number the text ends in remains
}

// tzPool keeps the tokenizers' stacks between responses.
var tzPool = sync.Pool{New: func() any { return new(jsontext.Tokenizer) }}

// next returns the next token; false at the end of the root value or at a
// syntax error (r.tz.Err).
func (r *reader) next() (jsontext.Token, bool) {
	if !r.ended {
		if tok, q := r.tz.Next(r.buf, r.p); tok.Kind != jsontext.NeedMore {
			r.p = q
			return tok, true
		}
		if r.tz.Err() != nil || r.tz.Done() {
			return jsontext.Token{}, false
		}
		r.ended, r.p = true, len(r.buf)
		r.tz.EndChunk(len(r.buf))
	}
	return r.tz.End()
}

// skip reads the rest of the value that starts with tok.
func (r *reader) skip(tok jsontext.Token) bool {
	for depth := 0; ; {
		switch tok.Kind {
		case jsontext.BeginArray, jsontext.BeginObject:
			depth++
		case jsontext.EndArray, jsontext.EndObject:
			depth--
		}
		if depth == 0 {
			return true
		}
		var ok bool
		if tok, ok = r.next(); !ok {
			return false
		}
	}
}

// own returns a string token's contents where they stay: in the text when
// they have no escapes, else a copy.
func (r *reader) own(tok jsontext.Token) []byte {
	if tok.InChunk {
		return tok.Str[:len(tok.Str):len(tok.Str)]
	}
	return slices.Clone(tok.Str)
}

// kindOf returns the kind of the value tok starts.
func kindOf(tok jsontext.Token) jsontext.Kind {
	switch tok.Kind {
	case jsontext.BeginArray:
		return jsontext.Array
	case jsontext.BeginObject:
		return jsontext.Object
	}
	return tok.ValueKind()
}
