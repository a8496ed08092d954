// Package oracle holds what the tests judge the request decoder by and
// production never runs: which bodies a stream may leave undecided, and
// json_tensor.cc's readings over the tape (tape.go).
package oracle

import (
	"github.com/tfsbridge/tfsbridge/translate/internal/jsontape"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Undecidable reports whether tfrequest's decoder, fed body as a stream
// beyond the replay size, may answer it with tfrequest.ErrUndecided when
// every signature name resolves to sig: the classes listed there that a
// fixed signature can meet, each judged from the whole text (slightly
// wider than the decoder's own tests, never narrower). The streaming
// tests use it to skip exactly those bodies.
func Undecidable(body []byte, sig *tensor.Signature, lim tensor.Limits) bool {
	if hasLongAtom(body) {
		return true
	}
	lim = lim.OrDefault()
	doc, err := jsontape.Parse(body, jsontape.ForElements(lim.MaxDepth, lim.MaxElements))
	if err != nil {
		return false
	}
	defer doc.Release()
	root := doc.Root()
	if root.Kind() != jsontext.Object {
		return false
	}
	if _, ok := sig.Input("b64"); ok && hasB64First(root) {
		return true
	}
	in, ok := root.Member("inputs")
	return ok && in.Kind() == jsontext.Object && len(sig.Inputs) > 1 && leaves(in) > lim.MaxElements
}

// hasLongAtom reports a number or literal token longer than
// jsontext.MaxPending (what a chunk boundary may cut) outside strings.
func hasLongAtom(body []byte) bool {
	inStr, esc, run := false, false, 0
	for _, c := range body {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case isAtomByte(c):
			if run++; run > jsontext.MaxPending {
				return true
			}
			continue
		case c == '"':
			inStr = true
		}
		run = 0
	}
	return false
}

// hasB64First reports an object anywhere in v whose first key is "b64".
func hasB64First(v jsontape.Value) bool {
	switch v.Kind() {
	case jsontext.Object:
		first := true
		for k, m := range v.Members() {
			if first && string(k.Str()) == "b64" || hasB64First(m) {
				return true
			}
			first = false
		}
	case jsontext.Array:
		for _, e := range v.Elems() {
			if hasB64First(e) {
				return true
			}
		}
	}
	return false
}

// leaves counts the scalars in v.
func leaves(v jsontape.Value) int64 {
	var n int64
	switch v.Kind() {
	case jsontext.Object:
		for _, m := range v.Members() {
			n += leaves(m)
		}
	case jsontext.Array:
		for _, e := range v.Elems() {
			n += leaves(e)
		}
	default:
		n = 1
	}
	return n
}

// isAtomByte reports the bytes a number or literal token is made of.
func isAtomByte(c byte) bool {
	return c-'0' < 10 || c|0x20-'a' < 26 || c == '-' || c == '+' || c == '.'
}
