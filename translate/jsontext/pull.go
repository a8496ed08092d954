package jsontext

// Pull reads a text held whole token by token (the Tokenizer fed it as
// one chunk): a reader decoding into its own structures (the v2 answer's
// header, a classify or regress body) pulls what it wants, skips the rest.
type Pull struct {
	tz    Tokenizer
	buf   []byte
	p     int  // offset after the last token
	ended bool // buf is read: only a number or literal it ends in remains
}

// Reset starts reading buf within lim, keeping earlier texts' memory.
func (r *Pull) Reset(buf []byte, lim Limits) {
	r.tz.Reset(lim)
	r.buf, r.p, r.ended = buf, 0, false
}

// Next returns the next token; false at the root value's end or an error
// (Err). A token's Str is valid until the next call.
func (r *Pull) Next() (Token, bool) {
	if !r.ended {
		if tok, q := r.tz.Next(r.buf, r.p); tok.Kind != NeedMore {
			r.p = q
			return tok, true
		}
		if r.tz.Err() != nil || r.tz.Done() {
			return Token{}, false
		}
		r.ended, r.p = true, len(r.buf)
		r.tz.EndChunk(len(r.buf))
	}
	return r.tz.End()
}

// Skip reads the rest of the value tok starts; false at an error.
func (r *Pull) Skip(tok Token) bool {
	for depth := 0; ; {
		switch tok.Kind {
		case BeginArray, BeginObject:
			depth++
		case EndArray, EndObject:
			depth--
		}
		if depth == 0 {
			return true
		}
		var ok bool
		if tok, ok = r.Next(); !ok {
			return false
		}
	}
}

// Pos returns the offset just after the last token read.
func (r *Pull) Pos() int { return r.p }

// Text returns the text being read.
func (r *Pull) Text() []byte { return r.buf }

// Err returns the error that ended the text, if any (a *SyntaxError).
func (r *Pull) Err() error { return r.tz.Err() }
