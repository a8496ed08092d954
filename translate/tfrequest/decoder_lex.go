package tfrequest

import (
	"bytes"
	"slices"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// slot is what the next value is for.
type slot struct {
	kind  slotKind
	input int32
	level int32
}

// What a roleB64 frame stands for (opFrame.ctx): a {"b64": "…"} value or
// another object, as only its end tells.
const (
	b64Leaf   uint8 = iota // a value inside a tensor (only a BYTES input takes it)
	b64Level               // an object inside a tensor at the wrong level
	b64Elem                // an element of plain "instances"
	b64First               // the first instance, "b64" first: a value or named inputs
	b64Inst                // an instance object, "b64" first (no input has that name)
	b64Inputs              // the "inputs" object, "b64" first: one value or named tensors
)

// What a roleB64 frame's members were (opFrame.flags).
const (
	b64Str uint8 = 1 << iota // the "b64" member's value is a string (in d.b64)
	b64Not                   // not a {"b64": "…"} object after all
)

// Write feeds the next chunk of the body. After an error every call
// returns the same answer (a syntax error, which TF reports first).
func (d *Decoder) Write(buf []byte) error {
	if d.failed {
		return d.final
	}
	d.chunk = buf
	d.lex(buf, 0, -1)
	d.off += int64(len(buf))
	d.tz.EndChunk(len(buf))
	if d.inst.on {
		d.instDumpFeed(buf[d.inst.from:])
		d.inst.from = 0
	}
	d.chunk = nil
	return d.final // nil unless failed
}

// lex reads the tokens of buf from p to its end or, when stop >= 0, to
// the end of the value that leaves stop containers open (replayInputs).
// Numbers in an innermost list of a numeric input take the hot path
// (leafRun) while nothing is dumped or skipped.
func (d *Decoder) lex(buf []byte, p int, stop int) {
	for !d.failed {
		if f := d.top(); f != nil && f.role == roleTensor && d.tz.ValueNext() && !d.dumping() && d.skipTo < 0 {
			in := &d.ins[f.input]
			if p = jsontext.SkipSpace(buf, p); p < len(buf) && buf[p] != ']' && in.curRank == int(f.level)+1 &&
				in.spec.DataType != tensor.Bytes && in.spec.DataType != tensor.Bool {
				p = d.leafRun(buf, p, f)
			}
		}
		tok, q := d.tz.Next(buf, p)
		if tok.Kind == jsontext.NeedMore {
			d.tokErr()
			return
		}
		d.token(tok, int(tok.Off-d.off), q)
		p = q
		if len(d.stack) == stop {
			return
		}
	}
}

// tokErr ends the decode at the tokenizer's error, if any: a syntax
// error (the answer: TF checks syntax first), or a number too long to
// hold across chunks (undecided).
func (d *Decoder) tokErr() {
	switch err := d.tz.Err().(type) { //nolint:errorlint // the tokenizer's own errors, never wrapped
	case nil:
		return
	case *jsontext.SyntaxError:
		d.final = tfjson.SyntaxError(err)
	default:
		d.final = undecided("a number token longer than 4096 bytes")
	}
	d.failed = true
}

// token handles a token from buf[p] (p < 0: an earlier chunk) to buf[q].
func (d *Decoder) token(tok jsontext.Token, p, q int) {
	switch tok.Kind {
	case jsontext.EndArray, jsontext.EndObject:
		d.close(tok, q)
	case jsontext.Key:
		d.top().n++
		d.keyEnd = q
		d.feed(tok, tok.InChunk && d.whole)
		d.key(tok.Str)
	default:
		d.value(tok, p)
	}
}

func (d *Decoder) top() *opFrame {
	if len(d.stack) == 0 {
		return nil
	}
	return &d.stack[len(d.stack)-1]
}

// value handles a value's token (a scalar or opening bracket) at buf[p].
func (d *Decoder) value(tok jsontext.Token, p int) {
	f := d.top()
	switch {
	case f == nil:
		d.dumpStart(dumpRoot, 0)
	case !f.obj:
		f.n++
	}
	s := slot{kind: slotSkip} // what the value is for
	switch {
	case d.skipping():
	case f == nil:
		s.kind = slotRoot
	case f.obj:
		s = slot{f.next, f.nextInput, f.level}
	case f.role == roleInstances:
		s.kind = slotInstance
	case f.role == roleTensor:
		s = slot{slotTensor, f.input, f.level + 1}
	}
	// A list or scalar where an instance or "inputs" belongs is one
	// input's whole value, where that may stand.
	obj := tok.Kind == jsontext.BeginObject
	switch s.kind {
	case slotInstance:
		d.elem, d.ekey = f.n-1, nil
		switch {
		case obj:
		case d.mode == instObjects:
			d.valueErr(0, errExpectObject(d.elem), false, false)
			s.kind = slotSkip
		case d.mode == instUndecided && len(d.ins) > 1:
			d.valueErr(0, errInstancesPlain(), false, false)
			s.kind = slotSkip
		default:
			d.mode = instPlain
			s.kind = slotItem
		}
	case slotInputs:
		d.itemDepth = len(d.stack)
		switch {
		case obj:
		case len(d.ins) > 1:
			d.valueErr(0, errInputsPlain(), false, false)
			s.kind = slotSkip
		default:
			s.kind = slotItem
		}
	}
	if s.kind == slotItem {
		d.itemDepth = len(d.stack)
		d.ins[s.input].from = p
		d.beginItem(int(s.input))
		s = slot{kind: slotTensor, input: s.input}
	}
	k := tok.ValueKind()
	fr := opFrame{obj: obj, role: roleSkip} // a container's
	stable := tok.InChunk && d.whole        // a string's
	switch s.kind {
	case slotRoot:
		d.rootKind = k
		if fr.obj {
			fr.role = roleTop
		}
	case slotSignature:
		d.sigKind = k
		if k == jsontext.String {
			if d.specul && len(tok.Str) > 0 {
				// Resolved as the default signature too early.
				d.lateSig = true
			}
			d.req.SignatureName = string(tok.Str)
		}
	case slotInstances:
		if k != jsontext.Array {
			d.instBad = true
			break
		}
		fr.role = roleInstances
		d.instDepth = len(d.stack)
	case slotInputs: // an object: the others became items above
		fr.role = roleInputs
		d.named = true
	case slotInstance: // an object, likewise
		if d.mode == instPlain {
			// Only a {"b64": …} value can follow plain first elements.
			fr.role, fr.ctx = roleB64, b64Elem
			break
		}
		fr.role = roleInstance
		d.inObjN = 0
		for i := range d.ins {
			d.ins[i].inObj = false
		}
		// Its text is kept from here: "keys must be equal to" prints it.
		d.inst = instDump{on: true, depth: len(d.stack), from: p, raw: d.inst.raw[:0]}
	case slotB64:
		if k != jsontext.String {
			d.b64Deviate(f, nil, false)
			break
		}
		// Decoded once the object is known to be a b64 value (closeB64).
		f.flags |= b64Str
		tok.Str, stable = d.keepB64(tok.Str, tok.InChunk)
	case slotTensor:
		tok.Str, stable = d.tensorValue(s, tok, &fr)
	}
	d.feed(tok, stable)
	if tok.Kind == jsontext.BeginArray || tok.Kind == jsontext.BeginObject {
		// The nesting bound was checked at its bracket (the tokenizer).
		d.stack = append(d.stack, fr)
	}
}

// tensorValue handles a value where a tensor element or a list of them
// belongs, with TF's checks in order: a list's level, or a value's level,
// the element limit and its type (a string for BYTES, else a number or
// literal). A list opens fr as the input's list; an object as a {"b64":
// "…"} candidate judged at its end; a scalar is stored. It returns the
// string to feed the dumps (kept when stored) and whether it is stable.
func (d *Decoder) tensorValue(s slot, tok jsontext.Token, fr *opFrame) ([]byte, bool) {
	i, level := int(s.input), int(s.level)
	fr.input, fr.level = s.input, s.level
	in := &d.ins[i]
	dt := in.spec.DataType
	if tok.Kind == jsontext.BeginArray {
		if d.openList(i, level) {
			fr.role = roleTensor
		} else {
			d.valueErr(i, errListLevel(level, in.curRank), true, false)
		}
		return nil, false
	}
	atLevel := d.leafLevel(i, level)
	res := leafOK
	switch {
	case tok.Kind == jsontext.BeginObject:
		// Its error, if any, is told at its end, with its dump (closeB64).
		fr.role, fr.ctx = roleB64, b64Leaf
		if !atLevel {
			fr.ctx = b64Level
		}
		return nil, false
	case !atLevel:
		d.valueErr(i, errLevel(dumpOf(tok), level, in.curRank), true, false)
		return tok.Str, tok.InChunk && d.whole
	case !d.countLeaf(i):
		return tok.Str, tok.InChunk && d.whole
	case (tok.Kind == jsontext.StringValue) != (dt == tensor.Bytes):
		res = leafTypeError
	case dt == tensor.Bytes:
		tok.Str = d.keep(tok.Str, tok.InChunk)
		d.ensureStrs(&in.input)
		in.strs = append(in.strs, tok.Str)
	default:
		d.ensureBuf(&in.input)
		in.data, res = appendLeaf(in.data, dt, tok.ValueKind(), tok.Num)
	}
	switch {
	case res == leafTypeError:
		d.valueErr(i, errType(dumpOf(tok), tok.ValueKind(), dt), true, false)
	case res == leafUnimplemented:
		d.valueErr(i, errUnimplemented(dumpOf(tok), dt), true, false)
	case level == 0:
		d.endItem(i)
	}
	return tok.Str, res == leafOK || tok.InChunk && d.whole
}

// key handles an object key (unescaped).
func (d *Decoder) key(k []byte) {
	f := d.top()
	f.next = slotSkip
	if d.skipping() {
		return
	}
	switch f.role {
	case roleTop:
		switch string(k) {
		case keySignature:
			if !d.sigKey {
				d.sigKey = true
				f.next = slotSignature
			}
		case keyInstances, keyInputs:
			format, next := tfjson.Row, slotInstances
			if string(k) == keyInputs {
				format, next = tfjson.Columnar, slotInputs
			}
			switch d.req.Format {
			case format:
				// A later duplicate: FindMember reads the first.
			case 0:
				d.req.Format = format
				if d.resolveSig() { // else judged at Close
					f.next = next
				}
			default:
				d.both = true
			}
		}
	case roleInstance, roleInputs:
		switch b64, named := d.b64First(f, k); {
		case b64:
			d.b64Key(f, named)
		case f.role == roleInputs:
			if i := d.lookup(k); i >= 0 && !d.ins[i].used {
				f.next, f.nextInput = slotItem, int32(i)
			}
		default:
			if d.mode == instUndecided {
				d.mode = instObjects // the first instance: named inputs
			}
			d.instanceKey(f, k)
		}
	case roleB64:
		if f.n == 1 && string(k) == tfjson.KeyB64 {
			f.next, f.nextInput = slotB64, f.input
			return
		}
		d.b64Deviate(f, k, true)
	}
}

// b64First reports whether k, the first key of an object that may be a
// {"b64": "…"} value, starts one: when it is "b64", unless an input has
// that name (named) and the whole body, looked ahead, shows otherwise.
func (d *Decoder) b64First(f *opFrame, k []byte) (b64, named bool) {
	if f.n != 1 || string(k) != tfjson.KeyB64 {
		return false, false
	}
	named = d.lookup(k) >= 0
	return !(named && d.whole && !d.b64Ahead()), named
}

// b64Key makes f, an instance or "inputs" object whose first key is
// "b64", a {"b64": "…"} candidate; named: an input has that name too.
func (d *Decoder) b64Key(f *opFrame, named bool) {
	ctx := b64Inst // a b64 value where objects are expected, or an input named b64
	switch {
	case f.role == roleInputs && named && !d.whole:
		f.role = roleSkip
		if d.ferr == nil {
			d.ferr = undecided(`"inputs" object starting with "b64" while an input has that name`)
		}
		return
	case f.role == roleInputs:
		// One b64 value, or named tensors none of which is "b64".
		d.named = false
		ctx = b64Inputs
	case d.mode == instUndecided:
		// The first instance: plain values of the first input, even
		// when there are several (TF's rule).
		d.mode = instPlain
		ctx = b64First
	case named && !d.whole:
		d.valueErr(0, undecided(`instance object starting with "b64" while an input has that name`), false, false)
		return
	}
	f.role, f.ctx = roleB64, ctx
	f.next = slotB64
}

// instanceKey maps a key of a named-inputs instance object to its input.
// TF reads the key as a C string: it ends at its first NUL (rowKey).
func (d *Decoder) instanceKey(f *opFrame, k []byte) {
	name, _, _ := bytes.Cut(k, []byte{0})
	d.keyBuf = append(d.keyBuf[:0], name...)
	d.ekey = d.keyBuf
	i := d.lookup(name)
	if i < 0 {
		d.valueErr(0, errNoNamedInput(name), true, false)
		return
	}
	if d.ins[i].inObj {
		// A duplicated key: TF adds both values (finish).
		d.dups = true
	} else {
		d.ins[i].inObj = true
		if d.inObjN++; d.inObjN == len(d.ins) && d.inst.on {
			// It named every input: its text is dropped.
			d.inst.on, d.inst.sub = false, nil
			if cap(d.inst.raw) > instRawMax {
				d.inst.raw = nil
			}
		}
	}
	f.next, f.nextInput = slotItem, int32(i)
}

// b64Deviate handles a {"b64": "…"} candidate that turns out another
// object: at its key k (atKey), or at its "b64" value, no string.
func (d *Decoder) b64Deviate(f *opFrame, k []byte, atKey bool) {
	first := f.flags&b64Not == 0
	f.flags |= b64Not
	f.next = slotSkip
	switch f.ctx {
	case b64Inputs:
		// Named tensors, whose first member names none.
		f.role = roleInputs
		d.named = true
		if atKey {
			d.key(k)
		}
	case b64Leaf, b64Level:
		if !first {
			return
		}
		// Its dump so far; the rest is fed as it is read.
		d.dumpStart(dumpLeaf, len(d.stack)-1)
		s := &d.dumps[dumpLeaf].s
		s.Feed(jsontext.Token{Kind: jsontext.BeginObject})
		if !atKey || f.n > 1 {
			s.Feed(jsontext.Token{Kind: jsontext.Key, Str: []byte(tfjson.KeyB64)})
			if f.flags&b64Str != 0 {
				s.Feed(jsontext.Token{Kind: jsontext.StringValue, Str: d.b64})
			}
		}
		if atKey {
			s.Feed(jsontext.Token{Kind: jsontext.Key, Str: k})
		}
	}
}

// close ends the innermost container at its bracket tok (before buf[q]).
func (d *Decoder) close(tok jsontext.Token, q int) {
	idx := len(d.stack) - 1
	f := d.stack[idx]
	d.stack = d.stack[:idx]
	d.feed(tok, false)
	if d.inst.on && idx == d.inst.depth { // the instance's text ends after its brace
		d.instDumpFeed(d.chunk[d.inst.from:q])
		d.inst.on = false
	}
	// Skipped values are not judged, but a list at the wrong length, which
	// TF finds before the error inside it, takes that error's place.
	skipped := d.skipTo >= 0 && idx >= d.skipTo
	if f.role == roleTensor {
		i := int(f.input)
		if !d.closeList(i, int(f.level), f.n) {
			d.valueErr(i, errListSize(f.n, int(f.level), d.ins[i].cur[f.level]), true, skipped)
		} else if f.level == 0 && !skipped {
			d.endItem(i)
		}
	}
	if skipped {
		if idx == d.skipTo {
			d.skipTo = -1
		}
		return
	}
	switch f.role {
	case roleInstances:
		d.batch = f.n
		d.instEmpty = f.n == 0
	case roleInstance:
		// {} first is an object of named inputs, all missing.
		if d.inObjN < len(d.ins) {
			names := sortedNames(len(d.ins), func(i int) string { return d.ins[i].spec.Name })
			d.valueErr(0, errKeysMissing(d.elem, d.instDumpBytes(), names), false, false)
		}
	case roleInputs:
		d.closeInputs()
	case roleB64:
		d.closeB64(&f)
	}
}

// closeInputs ends the named "inputs" object: TF walks the signature's
// inputs in order, each missing or holding its first error.
func (d *Decoder) closeInputs() {
	if d.ferr != nil {
		return
	}
	if d.colTrip && d.whole {
		d.replayInputs()
	}
	if d.colTrip {
		d.ferr = undecided("named inputs exceed the element limit together")
		return
	}
	for i := 0; i < len(d.ins) && d.ferr == nil; i++ {
		if !d.ins[i].used {
			d.ferr = errMissingNamedInput(d.ins[i].spec.Name)
		} else if d.colErrs != nil {
			d.ferr = d.colErrs[i]
		}
	}
}

// closeB64 ends a roleB64 object: what it turned out to be (TF's
// IsValBase64Object) and TF's answer there.
func (d *Decoder) closeB64(f *opFrame) {
	isB64 := f.n == 1 && f.flags == b64Str
	i := int(f.input)
	in := &d.ins[i]
	dump := func() []byte {
		switch {
		case isB64:
			return dumpOf(jsontext.Token{Kind: jsontext.BeginObject}, jsontext.Token{Kind: jsontext.Key, Str: []byte(tfjson.KeyB64)},
				jsontext.Token{Kind: jsontext.StringValue, Str: d.b64}, jsontext.Token{Kind: jsontext.EndObject})
		case f.n == 0:
			return []byte("{}")
		}
		return d.dumps[dumpLeaf].s.Bytes() // started by b64Deviate
	}
	switch {
	case f.ctx == b64Inputs && len(d.ins) > 1:
		// Only a b64 value (b64Deviate makes the others named tensors).
		d.valueErr(0, errInputsPlain(), false, false)
	case f.ctx == b64Inst && isB64:
		d.valueErr(0, errExpectObject(d.elem), false, false)
	case f.ctx == b64Elem && !isB64:
		d.valueErr(0, errExpectValue(d.elem), false, false)
	case f.ctx == b64First && !isB64 && d.lookup([]byte(tfjson.KeyB64)) >= 0:
		d.valueErr(0, undecided(`first instance starting with "b64" while an input has that name`), false, false)
	case f.ctx == b64First && !isB64, f.ctx == b64Inst:
		d.ekey = []byte(tfjson.KeyB64)
		d.valueErr(0, errNoNamedInput(d.ekey), true, false)
	case f.ctx == b64Level:
		d.valueErr(i, errLevel(dump(), int(f.level), in.curRank), true, false)
	default:
		// A value of input i: in a tensor (b64Leaf), or the whole item of
		// the first input, which starts here.
		if f.ctx != b64Leaf {
			d.beginItem(0)
			d.leafLevel(0, 0)
		}
		switch {
		case !d.countLeaf(i):
		case in.spec.DataType != tensor.Bytes:
			d.valueErr(i, errType(dump(), jsontext.Object, in.spec.DataType), true, false)
		case !isB64: // b64Leaf
			d.valueErr(i, errB64Format(dump()), true, false)
		default:
			out, ok := tfjson.AppendBase64(make([]byte, 0, len(d.b64)/4*3+3), d.b64)
			if !ok {
				d.valueErr(i, errB64Decode(), true, false)
				break
			}
			d.ensureStrs(&in.input)
			in.strs = append(in.strs, out)
			if f.level == 0 {
				d.endItem(i)
			}
		}
	}
}

// keepB64 keeps a {"b64": …} member's string until its object ends,
// held once (keep): a streamed image is mostly one such string.
func (d *Decoder) keepB64(s []byte, inChunk bool) ([]byte, bool) {
	if len(s) > arenaBlock/4 || inChunk && d.whole {
		d.b64 = d.keep(s, inChunk)
		return d.b64, true
	}
	d.b64buf = append(d.b64buf[:0], s...)
	d.b64 = d.b64buf
	return s, false
}

// keep returns s where it stays until the Request is released: in the
// whole body, in the tokenizer's memory a long string was gathered in
// (taken over, not copied), or in a copy.
func (d *Decoder) keep(s []byte, inChunk bool) []byte {
	switch {
	case inChunk && d.whole:
		return s
	case len(s) <= arenaBlock/4:
		return d.arena.copy(s)
	case !inChunk && d.tz.Own(s):
		return s[:len(s):len(s)]
	}
	return slices.Clone(s)
}

// leafRun is the hot path: the numbers of a numeric input's innermost
// lists, converted into its buffer, and the step to the next list ("],
// [") checked as close and open would. It leaves anything else to the
// general path: a list end it cannot step over, a token the chunk may
// cut, a limit, a value to refuse.
func (d *Decoder) leafRun(buf []byte, p int, f *opFrame) int {
	in := &d.ins[f.input]
	dt := in.spec.DataType
	d.ensureBuf(&in.input)
	data := in.data
	n := len(buf)
	elemBudget := d.lim.MaxElements - d.total
	nodeBudget := d.tz.ValuesLeft()
	// Stepping to a sibling list needs a parent list and the level's size.
	want := int64(-1)
	if f.level > 0 {
		want = in.cur[f.level]
	}
	float := dt == tensor.FP32 || dt == tensor.FP64
	shift := 2 // log2 of the element size: no division in the loop
	if dt == tensor.FP64 {
		shift = 3
	}
	var cnt, lists int64
	after := false // the tokenizer's state at the end: after a value, or one expected
	fn := f.n
	for cnt < elemBudget && cnt+lists < nodeBudget {
		took := 0
		if float {
			// The values of a list and its siblings in one tight loop over
			// the room data has, up to the last one's separator.
			limit := min(elemBudget-cnt, nodeBudget-cnt-lists, int64((cap(data)-len(data))>>shift))
			var end, stepped int
			data, end, took, stepped = jsontext.AppendDecimals(data, buf, p, shift == 3, int(limit), int(want), int(fn))
			if took > 0 {
				cnt += int64(took)
				lists += int64(stepped)
				fn += int64(took - stepped*int(want))
				p = end
			}
		}
		if took == 0 {
			// One number; the general path takes a token the chunk may
			// cut or one to refuse.
			num, end, ok := jsontext.ParseNumber(buf, p)
			if !ok || end >= n {
				break
			}
			if cap(data)-len(data) < dt.Size() {
				// Full: the next block (streaming) or a larger buffer.
				in.data = data
				d.room(&in.input)
				data = in.data
			}
			var res leafResult
			if data, res = appendLeaf(data, dt, jsontext.Number, num); res != leafOK {
				break
			}
			p = end
			cnt++
			fn++
		}
		p = jsontext.SkipSpace(buf, p)
		if p == n {
			after = true
			break
		}
		if buf[p] == ',' {
			p = jsontext.SkipSpace(buf, p+1)
			if p == n {
				break
			}
			continue
		}
		after = true
		if buf[p] != ']' || fn != want || cnt+lists+1 > nodeBudget {
			break
		}
		q := jsontext.SkipSpace(buf, p+1)
		if q == n || buf[q] != ',' {
			break
		}
		q = jsontext.SkipSpace(buf, q+1)
		if q == n || buf[q] != '[' {
			break
		}
		// "], [": the list closed at its level's size, its sibling opens.
		lists++
		fn = 0
		after = false
		p = jsontext.SkipSpace(buf, q+1)
		if p == n {
			break
		}
	}
	in.data = data
	d.total += cnt
	d.tz.Skip(cnt+lists, after, fn == 0)
	f.n = fn
	if lists > 0 {
		d.stack[len(d.stack)-2].n += lists
	}
	in.curCount += cnt
	return p
}

// replayInputs reads the values of the named "inputs" object that just
// closed again in signature order, counting the element limit from zero:
// which input meets it first, and so TF's error, depends on that order.
// Each value gets a tokenizer of its own; the root dump is paused.
func (d *Decoder) replayInputs() {
	root := &d.dumps[dumpRoot]
	rootOn, tz := root.on, d.tz
	root.on = false
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
	root.on = rootOn
}
