package tfrequest

import (
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// The decoder answers every body itself, errors included, reading it once
// in document order (a stream's text is gone once read). TF Serving checks
// JSON syntax anywhere in the body, then the root object's keys, then the
// values against the signature (in document order for "instances", in
// signature order for named "inputs"), then the input count. So the
// decoder
//
//   - stops at the first syntax error: the answer (Write returns it);
//   - records the root's facts (its kind, the first "signature_name"
//     value's kind, which input keys occur, the first "instances" value)
//     and a bounded dump of it, judged at Close in TF's order;
//   - records the first value error in TF's order with the dumps its text
//     needs, captured from the bytes at hand (a scalar's is the token; an
//     object's, a DumpStream fed while it is open), then reads the values
//     it concerns for syntax only. A list's length, which TF checks before
//     the values inside, is known after them: a list closing at the wrong
//     length replaces an error recorded inside it;
//   - for named "inputs", records the first error per input and picks at
//     Close by signature order.
//
// What a stream cannot decide is a 400 wrapping ErrUndecided; a whole body
// settles those with a second look at its text (second.go).

// record is what the decoder records for TF's checks, judged at Close.
type record struct {
	final error // the answer once certain: a syntax error or an undecidable token
	off   int64 // offset of the chunk being written

	// Root facts, judged at Close in TF's order.
	rootKind  jsontext.Kind
	sigKind   jsontext.Kind // of the first "signature_name" value (String if none)
	lateSig   bool          // a non-empty name came after the signature was resolved
	resolveE  error         // the error resolving the signature gave (with no Signature)
	both      bool
	lost      bool // lateSig named other inputs: the values were read against the wrong ones
	instBad   bool // the first "instances" is not a list
	instEmpty bool

	// Value errors.
	ferr      error   // the first one in TF's order, as TF words it
	colErrs   []error // named "inputs": the first per input
	colTrip   bool    // named "inputs" exceeded the element limit
	named     bool    // "inputs" is an object of named tensors
	skipTo    int     // values are skipped while len(stack) > skipTo (-1: none)
	instDepth int     // stack index of the "instances" list
	itemDepth int     // stack index of the current item's root
	elem      int64   // index of the current instance
	ekey      []byte  // its key being read (objects), nil for plain values
	keyBuf    []byte  // ekey's storage
	b64       []byte  // the string of the open b64 object (in b64buf or the body)
	b64buf    []byte

	dumps [numDumps]dumpSlot
	inst  instDump

	keyEnd    int  // chunk offset after the last key's closing quote
	replaying bool // replayInputs is reading the named "inputs" again

	chunk []byte // the chunk being written (nil outside Write)
}

// The dumps an error text may need, at most one of each open at a time.
const (
	dumpRoot = iota // the document (FormatError of the root checks)
	dumpLeaf        // an object where a tensor value belongs
	numDumps
)

// dumpSlot is one dump being captured, and its container's stack index.
type dumpSlot struct {
	s     jsontext.DumpStream
	depth int
	on    bool
}

// skipping reports that values are read for syntax only.
func (d *Decoder) skipping() bool {
	return d.skipTo >= 0 && len(d.stack) > d.skipTo
}

// valueErr records a value error of input i (inside an item: row format
// wraps it) unless one came first, and skips the values it concerns;
// replace is for a list's length, which TF checks before its values.
func (d *Decoder) valueErr(i int, err error, item, replace bool) {
	if item && d.req.Format == tfjson.Row {
		err = wrapElement(int(d.elem), d.ekey, err)
	}
	if d.named && d.req.Format == tfjson.Columnar {
		if d.colErrs == nil {
			d.colErrs = make([]error, len(d.ins))
		}
		if replace || d.colErrs[i] == nil {
			d.colErrs[i] = err
		}
	} else if replace || d.ferr == nil {
		d.ferr = err
	}
	// Row format stops at the first error; named inputs go on with the
	// next, skipping the rest of this one's value (none for a scalar).
	scope := d.itemDepth
	if d.req.Format == tfjson.Row {
		scope = d.instDepth
	}
	if d.skipTo < 0 && len(d.stack) > scope {
		d.skipTo = scope
	}
}

// --- dumps ---

// dumpStart starts dump k of a value whose container sits at index depth.
func (d *Decoder) dumpStart(k int, depth int) {
	sl := &d.dumps[k]
	sl.s.Restart()
	sl.depth = depth
	sl.on = true
}

// dumping reports that a dump is being captured.
func (d *Decoder) dumping() bool {
	return d.dumps[dumpRoot].on || d.dumps[dumpLeaf].on
}

// feed passes a token to every dump capturing, ending those of the
// container a bracket closes; stable: a string stays unmodified until the
// Request is released, so a dump may keep it rather than a copy.
func (d *Decoder) feed(tok jsontext.Token, stable bool) {
	if !d.dumping() {
		return
	}
	end := tok.Kind == jsontext.EndArray || tok.Kind == jsontext.EndObject
	for k := range d.dumps {
		sl := &d.dumps[k]
		if !sl.on {
			continue
		}
		if stable {
			sl.s.FeedStable(tok)
		} else {
			sl.s.Feed(tok)
		}
		if sl.s.Full() || end && sl.depth == len(d.stack) {
			sl.on = false
		}
	}
}

// dumpOf returns the dump of a value given as its tokens.
func dumpOf(toks ...jsontext.Token) []byte {
	var s jsontext.DumpStream
	s.Reset(nil)
	for _, tok := range toks {
		s.Feed(tok)
	}
	return s.Bytes()
}
