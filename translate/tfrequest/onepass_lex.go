package tfrequest

import (
	"encoding/binary"
	"math"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// maxPending bounds a number or literal split across chunks; a longer one
// (legal JSON: digits beyond the 17th are read and dropped) falls back.
const maxPending = 4096

// slot is what the next value is for.
type slot struct {
	kind  slotKind
	input int32
	level int32
}

// Write feeds the next chunk of the body. After an error (ErrFallback)
// every call fails the same way.
func (d *Decoder) Write(buf []byte) error {
	if d.failed {
		return ErrFallback
	}
	n := len(buf)
	p := 0
	for p < n && !d.failed {
		switch d.st {
		case lxStart:
			p = d.start(buf, p)
		case lxValue:
			p = skipSpace(buf, p)
			if p == n {
				break
			}
			if f := d.top(); f != nil && f.role == roleTensor && buf[p] != ']' {
				if in := &d.ins[f.input]; in.curRank == int(f.level)+1 && in.spec.DataType != tensor.Bytes && in.spec.DataType != tensor.Bool {
					p = d.leafRun(buf, p, f)
					if d.st != lxValue || p == n {
						break
					}
				}
			}
			p = d.value(buf, p)
		case lxAfter:
			p = skipSpace(buf, p)
			if p == n {
				break
			}
			f := d.top()
			switch c := buf[p]; {
			case c == ',':
				p++
				d.st = lxValue
				if f.obj {
					d.st = lxNextKey
				}
			case c == ']' && !f.obj, c == '}' && f.obj:
				p++
				d.close()
			default:
				d.fail()
			}
		case lxKey, lxNextKey:
			p = skipSpace(buf, p)
			if p == n {
				break
			}
			switch c := buf[p]; {
			case c == '"':
				if !d.node() {
					break
				}
				d.top().n++
				p = d.str(buf, p+1, true)
			case c == '}' && d.st == lxKey:
				p++
				d.close()
			default:
				d.fail()
			}
		case lxColon:
			p = skipSpace(buf, p)
			if p == n {
				break
			}
			if buf[p] != ':' {
				d.fail()
				break
			}
			p++
			d.st = lxValue
		case lxString:
			p = d.strMore(buf, p)
		case lxAtom:
			p = d.atomMore(buf, p)
		case lxDone:
			// rapidjson stops at the end of the root value
			// (kParseStopWhenDoneFlag): the rest is never read.
			p = n
		}
	}
	if d.failed {
		return ErrFallback
	}
	return nil
}

// start skips the byte-order mark (each of EF BB BF only if present, in
// that order, as skipBOM does) and spaces before the root, which must be
// an object.
func (d *Decoder) start(buf []byte, p int) int {
	const bom = "\xEF\xBB\xBF"
	for p < len(buf) && d.bom < 3 {
		c := buf[p]
		for d.bom < 3 && c != bom[d.bom] {
			d.bom++
		}
		if d.bom == 3 {
			break
		}
		d.bom++
		p++
	}
	if d.bom < 3 {
		return p
	}
	p = skipSpace(buf, p)
	if p == len(buf) {
		return p
	}
	if buf[p] != '{' {
		d.fail()
		return p
	}
	d.st = lxValue
	return d.value(buf, p)
}

func skipSpace(buf []byte, p int) int {
	for p < len(buf) {
		switch buf[p] {
		case ' ', '\n', '\r', '\t':
			p++
		default:
			return p
		}
	}
	return p
}

func (d *Decoder) top() *opFrame {
	if len(d.stack) == 0 {
		return nil
	}
	return &d.stack[len(d.stack)-1]
}

// node counts one value or key against the tape parser's node budget.
func (d *Decoder) node() bool {
	d.nodes++
	if d.nodes > d.maxNodes {
		d.fail()
		return false
	}
	return true
}

// slot returns what the next value in the innermost container is for.
func (d *Decoder) slot() slot {
	f := d.top()
	switch {
	case f == nil:
		return slot{kind: slotRoot}
	case f.obj:
		return slot{kind: f.next, input: f.nextInput, level: f.level}
	case f.role == roleInstances:
		return slot{kind: slotInstance}
	case f.role == roleTensor:
		return slot{kind: slotTensor, input: f.input, level: f.level + 1}
	}
	return slot{kind: slotSkip}
}

// value reads the start of a value at buf[p].
func (d *Decoder) value(buf []byte, p int) int {
	c := buf[p]
	f := d.top()
	if c == ']' {
		// Only an empty list may close where a value is expected.
		if f == nil || f.obj || f.n != 0 {
			d.fail()
			return p
		}
		d.close()
		return p + 1
	}
	if !d.node() {
		return p
	}
	if f != nil && !f.obj {
		f.n++
	}
	s := d.slot()
	if c != '{' {
		// A list or scalar where one input's whole value may stand.
		switch s.kind {
		case slotInstance:
			if d.mode == instObjects || len(d.ins) > 1 {
				d.fail()
				return p
			}
			d.mode = instPlain
			s = slot{kind: slotItem}
		case slotInputs:
			if len(d.ins) > 1 {
				d.fail()
				return p
			}
			s = slot{kind: slotItem}
		}
	}
	if s.kind == slotItem {
		d.beginItem(int(s.input))
		s = slot{kind: slotTensor, input: s.input}
	}
	switch c {
	case '[':
		d.openArray(s)
		return p + 1
	case '{':
		d.openObject(s)
		return p + 1
	case '"':
		d.vslot = s
		return d.str(buf, p+1, false)
	}
	d.vslot = s
	return d.atom(buf, p)
}

func (d *Decoder) push(f opFrame) bool {
	if len(d.stack) >= d.lim.MaxDepth {
		d.fail()
		return false
	}
	d.stack = append(d.stack, f)
	return true
}

func (d *Decoder) openArray(s slot) {
	switch s.kind {
	case slotInstances:
		d.push(opFrame{role: roleInstances})
	case slotSkip:
		d.push(opFrame{role: roleSkip})
	case slotTensor:
		if !d.openList(int(s.input), int(s.level)) {
			d.fail()
			return
		}
		d.push(opFrame{role: roleTensor, input: s.input, level: s.level})
	default:
		d.fail()
		return
	}
	d.st = lxValue
}

func (d *Decoder) openObject(s slot) {
	f := opFrame{obj: true}
	switch s.kind {
	case slotRoot:
		f.role = roleTop
	case slotInputs:
		f.role = roleInputs
	case slotSkip:
		f.role = roleSkip
	case slotInstance:
		switch d.mode {
		case instUndecided:
			f.role = roleFirstInst
		case instPlain:
			// Only a {"b64": …} value can follow plain first elements.
			d.beginItem(0)
			if !d.leafLevel(0, 0) {
				d.fail()
				return
			}
			f.role = roleB64
		default:
			f.role = roleInstance
			d.resetInObj()
		}
	case slotTensor:
		i := int(s.input)
		if d.ins[i].spec.DataType != tensor.Bytes || !d.leafLevel(i, int(s.level)) {
			d.fail()
			return
		}
		f.role, f.input, f.level = roleB64, s.input, s.level
	default:
		d.fail()
		return
	}
	if d.push(f) {
		d.st = lxKey
	}
}

func (d *Decoder) resetInObj() {
	for i := range d.ins {
		d.ins[i].inObj = false
	}
}

// key handles an object key (its bytes, escapes excluded).
func (d *Decoder) key(k []byte) {
	d.st = lxColon
	f := d.top()
	f.next = slotSkip
	switch f.role {
	case roleTop:
		switch string(k) {
		case keySignature:
			if !d.sigKey {
				d.sigKey = true
				f.next = slotSignature
			}
		case keyInstances, keyInputs:
			format := Row
			if string(k) == keyInputs {
				format = Columnar
			}
			switch d.req.Format {
			case format:
				// A later duplicate: FindMember reads the first.
			case 0:
				d.req.Format = format
				if !d.resolveSig() {
					d.fail()
					return
				}
				f.next = slotInstances
				if format == Columnar {
					f.next = slotInputs
				}
			default:
				d.fail() // both keys
			}
		}
	case roleFirstInst:
		if string(k) == keyB64 {
			// {"b64": …} first: plain values of the first input.
			if len(d.ins) > 1 {
				d.fail()
				return
			}
			d.mode = instPlain
			d.beginItem(0)
			d.leafLevel(0, 0)
			f.role = roleB64
			f.next = slotB64
			return
		}
		d.mode = instObjects
		f.role = roleInstance
		d.resetInObj()
		d.instanceKey(f, k)
	case roleInstance:
		d.instanceKey(f, k)
	case roleInputs:
		if f.n == 1 && string(k) == keyB64 {
			d.fail() // maybe a b64 value, maybe an input named b64
			return
		}
		if i := d.lookup(k); i >= 0 && !d.ins[i].used {
			f.next, f.nextInput = slotItem, int32(i)
		}
	case roleB64:
		if f.n != 1 || string(k) != keyB64 {
			d.fail()
			return
		}
		f.next, f.nextInput = slotB64, f.input
	}
}

// instanceKey maps a key of a named-inputs instance object to its input.
func (d *Decoder) instanceKey(f *opFrame, k []byte) {
	if f.n == 1 && string(k) == keyB64 {
		d.fail() // maybe a b64 value where objects are expected
		return
	}
	i := d.lookup(k)
	if i < 0 || d.ins[i].inObj {
		d.fail() // unknown input, or a duplicated key
		return
	}
	d.ins[i].inObj = true
	f.next, f.nextInput = slotItem, int32(i)
}

// close ends the innermost container at its closing bracket.
func (d *Decoder) close() {
	f := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	ok := true
	switch f.role {
	case roleTop:
		ok = d.req.Format != 0
	case roleInstances:
		ok = f.n > 0
		d.batch = f.n
	case roleFirstInst:
		ok = false // {}: named inputs, all missing
	case roleInstance:
		for i := range d.ins {
			ok = ok && d.ins[i].inObj
		}
	case roleInputs:
		for i := range d.ins {
			ok = ok && d.ins[i].used
		}
	case roleTensor:
		ok = d.closeList(int(f.input), int(f.level), f.n)
		if ok && f.level == 0 {
			ok = d.endItem(int(f.input))
		}
	case roleB64:
		ok = f.n == 1
		if ok && f.level == 0 {
			ok = d.endItem(int(f.input))
		}
	}
	if !ok {
		d.fail()
		return
	}
	d.st = lxAfter
	if len(d.stack) == 0 {
		d.st = lxDone
	}
}

// str reads a string from buf[p], just after its opening quote.
func (d *Decoder) str(buf []byte, p int, key bool) int {
	q, ok := scanString(buf, p)
	if !ok {
		d.fail()
		return q
	}
	d.strKey = key
	if q == len(buf) {
		d.pend = append(d.pend[:0], buf[p:]...)
		d.st = lxString
		return q
	}
	d.strDone(buf[p:q], true)
	return q + 1
}

// strMore continues a string split across chunks.
func (d *Decoder) strMore(buf []byte, p int) int {
	q, ok := scanString(buf, p)
	if !ok {
		d.fail()
		return q
	}
	d.pend = append(d.pend, buf[p:q]...)
	if q == len(buf) {
		return q
	}
	d.strDone(d.pend, false)
	d.pend = d.pend[:0]
	return q + 1
}

// scanString returns the offset of the closing quote (len(buf) when the
// chunk ends first). Escapes and raw control characters fall back.
func scanString(buf []byte, p int) (int, bool) {
	for ; p < len(buf); p++ {
		c := buf[p]
		if c == '"' {
			return p, true
		}
		if c == '\\' || c < 0x20 {
			return p, false
		}
	}
	return p, true
}

// strDone handles a complete string; inChunk says s lies in the chunk
// being written (and may be kept in whole-body mode).
func (d *Decoder) strDone(s []byte, inChunk bool) {
	if d.strKey {
		d.key(s)
		return
	}
	d.st = lxAfter
	v := d.vslot
	switch v.kind {
	case slotSkip:
	case slotSignature:
		if d.specul && len(s) > 0 {
			d.fail() // resolved as the default signature too early
			return
		}
		d.req.SignatureName = string(s)
	case slotB64:
		i := int(v.input)
		if !d.countLeaf(i) {
			d.fail()
			return
		}
		out, ok := base64Unescape(make([]byte, 0, len(s)/4*3+3), s)
		if !ok {
			d.fail()
			return
		}
		d.ensureStrs(&d.ins[i].input)
		d.ins[i].strs = append(d.ins[i].strs, out)
	case slotTensor:
		i := int(v.input)
		in := &d.ins[i]
		if in.spec.DataType != tensor.Bytes || !d.leafLevel(i, int(v.level)) || !d.countLeaf(i) {
			d.fail()
			return
		}
		if !(inChunk && d.alias) {
			s = d.arena.copy(s)
		}
		d.ensureStrs(&in.input)
		in.strs = append(in.strs, s)
		if v.level == 0 && !d.endItem(i) {
			d.fail()
		}
	default:
		d.fail()
	}
}

// isAtomByte reports the bytes a number or literal token is made of.
func isAtomByte(c byte) bool {
	return c-'0' < 10 || c|0x20-'a' < 26 || c == '-' || c == '+' || c == '.'
}

// atom reads a number or literal starting at buf[p].
func (d *Decoder) atom(buf []byte, p int) int {
	q := p
	for q < len(buf) && isAtomByte(buf[q]) {
		q++
	}
	if q == len(buf) {
		d.pend = append(d.pend[:0], buf[p:]...)
		d.st = lxAtom
		return q
	}
	d.atomDone(buf[p:q])
	return q
}

// atomMore continues a number or literal split across chunks.
func (d *Decoder) atomMore(buf []byte, p int) int {
	q := p
	for q < len(buf) && isAtomByte(buf[q]) {
		q++
	}
	d.pend = append(d.pend, buf[p:q]...)
	if len(d.pend) > maxPending {
		d.fail()
		return q
	}
	if q == len(buf) {
		return q
	}
	d.atomDone(d.pend)
	d.pend = d.pend[:0]
	return q
}

// atomDone handles a complete number or literal token.
func (d *Decoder) atomDone(tok []byte) {
	d.st = lxAfter
	var k jsontext.Kind
	var num jsontext.Num
	switch string(tok) {
	case "true":
		k = jsontext.True
	case "false":
		k = jsontext.False
	case "null":
		k = jsontext.Null
	default:
		var end int
		var ok bool
		num, end, ok = jsontext.ParseNumber(tok, 0)
		if !ok || end != len(tok) {
			d.fail()
			return
		}
		k = jsontext.Number
	}
	v := d.vslot
	switch v.kind {
	case slotSkip:
		return
	case slotTensor:
	default:
		d.fail()
		return
	}
	i := int(v.input)
	in := &d.ins[i]
	if in.spec.DataType == tensor.Bytes || !d.leafLevel(i, int(v.level)) || !d.countLeaf(i) {
		d.fail()
		return
	}
	d.ensureBuf(&in.input)
	var res leafResult
	in.data, res = appendLeaf(in.data, in.spec.DataType, k, num)
	if res != leafOK || (v.level == 0 && !d.endItem(i)) {
		d.fail()
	}
}

// leafRun is the hot path: the numbers of the innermost lists of a
// numeric input, converted straight into its buffer, and the step from one
// innermost list to the next ("], [") checked inline as close and
// openArray would check it. It stops, leaving the rest to the general
// path, at anything else: the end of a list it cannot step over, a token
// the chunk may cut, a limit, a value to refuse.
func (d *Decoder) leafRun(buf []byte, p int, f *opFrame) int {
	in := &d.ins[f.input]
	dt := in.spec.DataType
	d.ensureBuf(&in.input)
	data := in.data
	n := len(buf)
	elemBudget := d.lim.MaxElements - d.total
	nodeBudget := d.maxNodes - d.nodes
	// The step to a sibling list needs its level's size known and a
	// parent list (level > 0).
	want := int64(-1)
	if f.level > 0 {
		want = in.cur[f.level]
	}
	float := dt == tensor.FP32 || dt == tensor.FP64
	esz := dt.Size()
	var cnt, lists int64
	fn := f.n
	for cnt < elemBudget && cnt+lists < nodeBudget {
		var num jsontext.Num
		var v float64
		end, ok := 0, false
		if float {
			v, end, ok = jsontext.ParseDecimal(buf, p)
		}
		if !ok {
			num, end, ok = jsontext.ParseNumber(buf, p)
			if !ok || end >= n {
				break
			}
			v = num.Float64()
		}
		if cap(data)-len(data) < esz {
			// Full: the next block (streaming) or a larger buffer.
			in.data = data
			d.room(&in.input)
			data = in.data
		}
		switch dt {
		case tensor.FP32:
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(v)))
		case tensor.FP64:
			data = binary.LittleEndian.AppendUint64(data, math.Float64bits(v))
		default:
			var res leafResult
			if data, res = appendLeaf(data, dt, jsontext.Number, num); res != leafOK {
				end = -1
			}
		}
		if end < 0 {
			break
		}
		cnt++
		fn++
		p = skipSpace(buf, end)
		if p == n {
			d.st = lxAfter
			break
		}
		if buf[p] == ',' {
			p = skipSpace(buf, p+1)
			if p == n {
				break
			}
			continue
		}
		d.st = lxAfter
		if buf[p] != ']' || fn != want || cnt+lists+1 > nodeBudget {
			break
		}
		q := skipSpace(buf, p+1)
		if q == n || buf[q] != ',' {
			break
		}
		q = skipSpace(buf, q+1)
		if q == n || buf[q] != '[' {
			break
		}
		// "], [": the list closed at its level's size; its sibling opens
		// at the same level and depth.
		lists++
		fn = 0
		d.st = lxValue
		p = skipSpace(buf, q+1)
		if p == n {
			break
		}
	}
	in.data = data
	d.total += cnt
	d.nodes += cnt + lists
	f.n = fn
	if lists > 0 {
		d.stack[len(d.stack)-2].n += lists
	}
	in.curCount += cnt
	return p
}
