package tfrequest

import (
	"slices"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// The decoder turns a predict body into its Request without a tape: the
// signature gives every input's dtype, so numbers go straight into the
// tensor buffers as they are read. It is a resumable state machine (an
// explicit container stack) fed with Write in chunks that may end
// anywhere, and finished with Close: the one implementation of TF
// Serving's request rules, for a whole body (Parse, one chunk) and a
// stream alike. decoder_record.go says how it decides errors as TF does.

// Decoder reads one request body: Write it in chunks, then Close, which
// returns what Parse over the whole text would, Request or *apierr.Error
// (for the bodies ErrUndecided lists, a 400 wrapping it). Write returns an
// error only once the answer is certain (a JSON syntax error, which TF
// reports first), and Close then returns the same. The caller may reuse a
// chunk after Write. A stream's numeric data goes into fixed blocks that
// never move (blocks.go).
type Decoder struct {
	resolve Resolver
	lim     tensor.Limits
	whole   bool   // the one chunk is the whole body (Parse)
	body    []byte // and this is it
	known   bool   // the signature name is known before the body names it
	hint    int64  // expected number of values (whole body), 0 if unknown
	total   int64  // tensor elements so far, all inputs

	req   *Request // its Signature once resolved with usable inputs
	ins   []opInput
	mode  instMode
	batch int64

	tz     jsontext.Tokenizer // rapidjson's reader: syntax, its errors, the bounds
	stack  []opFrame          // the open containers, and what each is for
	sigKey bool               // "signature_name" met (the first one counts)
	specul bool               // the signature was resolved before "signature_name" could be seen
	arena  arena              // string bytes copied out of chunks
	failed bool
	dups   bool // an instance object named an input twice
	inObjN int  // inputs the current instance object has named

	record
}

// opInput is one signature input's tensor (input) and the item being read:
// its shape so far (-1 for a level whose first list is open), its rank
// once known (-1 before) and its value count.
type opInput struct {
	input
	cur      []int64
	curRank  int
	curCount int64
	from     int // chunk offset of its value in the named "inputs" (replayInputs)
}

// instMode is how "instances" is read, decided by its first element as TF does.
type instMode uint8

const (
	instUndecided instMode = iota
	instPlain              // every element is one value of the first input
	instObjects            // every element is an object of named inputs
)

// role is what an open container is for.
type role uint8

const (
	roleTop       role = iota // the root object
	roleInstances             // the "instances" list
	roleInstance              // an instance object: named inputs, or the first one a b64 value too
	roleInputs                // the columnar "inputs" object of named tensors
	roleTensor                // a list inside one input's item
	roleB64                   // an object where a {"b64": …} value may stand
	roleSkip                  // a value nobody reads (syntax is still checked)
)

// slotKind is what the next value is for.
type slotKind uint8

const (
	slotSkip      slotKind = iota
	slotRoot               // the document
	slotSignature          // "signature_name"'s value
	slotInstances          // "instances"'s value
	slotInputs             // "inputs"'s value
	slotInstance           // an element of "instances"
	slotItem               // the whole value of one input's item
	slotTensor             // an element of a list inside an item
	slotB64                // the string of a {"b64": …} value
)

// opFrame is one open container.
type opFrame struct {
	role  role
	obj   bool
	input int32 // roleTensor, roleB64: the input
	level int32 // roleTensor, roleB64: nesting level inside the item
	n     int64 // elements (lists) or members (objects) so far
	ctx   uint8 // roleB64: what the object stands for
	flags uint8 // roleB64: what its member was
	// Objects: what the value of the member whose key was just read is
	// for, and for which input.
	next      slotKind
	nextInput int32
}

// NewDecoder returns a decoder for one streamed request body.
func NewDecoder(resolve Resolver, lim tensor.Limits) *Decoder {
	lim = lim.OrDefault()
	d := &Decoder{resolve: resolve, lim: lim, req: &Request{},
		record: record{skipTo: -1, rootKind: 0xFF, sigKind: jsontext.String, keyBuf: make([]byte, 0, 32)}}
	d.tz.Reset(tfjson.Limits(lim))
	return d
}

// Abort gives back the decoder's pooled blocks when the body will not be
// finished; the decoder cannot be used afterwards.
func (d *Decoder) Abort() {
	d.failed = true
	d.req.Release()
	d.tz = jsontext.Tokenizer{}
}

// resolveSig resolves the signature when the input map is first needed.
// TF resolves after reading "signature_name"; a body naming it after the
// inputs is resolved with the default name first (rootErr checks later).
func (d *Decoder) resolveSig() bool {
	if d.req.Signature != nil {
		return true
	}
	if d.sigKind != jsontext.String {
		return false // TF refuses the body before it resolves
	}
	d.specul = !d.sigKey && !d.known
	sig, err := d.resolveName(d.req.SignatureName)
	if err != nil {
		d.resolveE = err
		return false
	}
	d.req.Signature = sig
	d.ins = make([]opInput, len(sig.Inputs))
	for i := range d.ins {
		d.ins[i].spec = &sig.Inputs[i]
	}
	return true
}

// resolveName resolves the signature named name, with TF's error: the
// resolver's, or that it has no input map.
func (d *Decoder) resolveName(name string) (*tensor.Signature, error) {
	sig, err := d.resolve(name)
	if err == nil && (sig == nil || len(sig.Inputs) == 0) {
		err = errNoInputMap(name)
	}
	return sig, err
}

// lookup returns the index of the signature input named name, or -1.
func (d *Decoder) lookup(name []byte) int {
	for i := range d.ins {
		if d.ins[i].spec.Name == string(name) {
			return i
		}
	}
	return -1
}

// beginItem starts one item (row) or the whole tensor (columnar) of input i.
func (d *Decoder) beginItem(i int) {
	in := &d.ins[i]
	in.used, in.cur, in.curRank, in.curCount = true, in.cur[:0], -1, 0
}

// endItem ends input i's item: AddInstanceItem's comparison with the
// first item (row), or the recording of the tensor's shape (columnar).
func (d *Decoder) endItem(i int) {
	in := &d.ins[i]
	if d.req.Format == tfjson.Columnar || !in.seen {
		in.seen = true
		in.size = in.curCount
		in.shape = append(in.shape[:0], in.cur...)
	} else if in.size != in.curCount || !slices.Equal(in.shape, in.cur) {
		d.valueErr(i, errItem(in.size, in.curCount, in.shape, in.cur), true, false)
	}
}

// openList checks a list at level of input i's item against the shape
// inferred so far (GetDenseTensorShape and FillTensorProto in one pass).
func (d *Decoder) openList(i int, level int) bool {
	in := &d.ins[i]
	if in.curRank < 0 { // still on the path of first elements: a new dimension
		in.cur = append(in.cur, -1)
	}
	return in.curRank < 0 || level < in.curRank
}

// closeList checks a closed list's length against its level's size; the
// first list of a level sets it. An empty first list ends the shape.
func (d *Decoder) closeList(i int, level int, n int64) bool {
	in := &d.ins[i]
	if in.cur[level] < 0 {
		in.cur[level] = n
		if in.curRank < 0 {
			in.curRank = level + 1 // n == 0: denseShape stops here
		}
	}
	return in.cur[level] == n
}

// leafLevel checks a value that is not a list at level: the first one
// fixes the rank, the others must sit at it.
func (d *Decoder) leafLevel(i int, level int) bool {
	in := &d.ins[i]
	if in.curRank < 0 {
		in.curRank = level
	}
	return level == in.curRank
}

// countLeaf counts one tensor element of input i against the element
// limit, recording the error at the limit (undecided for several named
// "inputs": TF counts them in signature order).
func (d *Decoder) countLeaf(i int) bool {
	switch {
	case d.total < d.lim.MaxElements:
		d.total++
		d.ins[i].curCount++
		return true
	case d.named && d.req.Format == tfjson.Columnar && len(d.ins) > 1 && !d.replaying:
		d.colTrip = true // replayInputs settles it for a whole body
		d.valueErr(i, undecided("named inputs exceed the element limit together"), false, false)
	default:
		d.valueErr(i, errTooManyElements(d.lim.MaxElements), true, false)
	}
	return false
}

// ensureBuf gives an input a pooled data buffer (sized by the hint for a
// single input) with room for one more element (room).
func (d *Decoder) ensureBuf(in *input) {
	if in.buf == nil {
		in.buf = getBuf()
		in.data = (*in.buf)[:0]
		d.req.bufs = append(d.req.bufs, in.buf)
		if len(d.ins) == 1 && d.hint > 0 {
			n := min(d.hint, d.lim.MaxElements)
			in.data = slices.Grow(in.data, int(n)*in.spec.DataType.Size())
		}
		if !d.whole && cap(in.data) > BlockSize {
			// Pooled larger than a block: a block holds BlockSize at most.
			in.data = in.data[:0:BlockSize]
		}
	}
	d.room(in)
}

// ensureStrs sizes a single BYTES input's string list by the hint, so a
// million strings are not appended by doubling (as the tape oracle does).
func (d *Decoder) ensureStrs(in *input) {
	if in.strs == nil && len(d.ins) == 1 && d.hint > 0 {
		in.strs = make([][]byte, 0, min(d.hint, d.lim.MaxElements))
	}
}

// finish builds the Request's tensors after checking that every used
// input holds the values its shape says (a broken invariant must not
// become a panic or a wrong tensor: ok is false).
func (d *Decoder) finish() bool {
	for i := range d.ins {
		in := &d.ins[i]
		if !in.used {
			continue
		}
		want := in.size
		if d.req.Format == tfjson.Row {
			want *= d.batch
		}
		got := int64(len(in.strs))
		if in.spec.DataType != tensor.Bytes {
			n := len(in.data) // and the sealed blocks'
			for _, b := range in.blocks {
				n += len(b)
			}
			got = int64(n / in.spec.DataType.Size())
		}
		// A duplicated instance key leaves more values (buildTensors).
		if got != want && !(d.dups && got > want) {
			return false
		}
	}
	// A buffer only for an input without values: room must not seal here.
	giveBuf := func(in *input) {
		if in.buf == nil {
			d.ensureBuf(in)
		}
	}
	buildTensors(d.req, len(d.ins), func(i int) *input { return &d.ins[i].input }, d.batch, giveBuf)
	return true
}

// arena holds string bytes copied out of chunks in blocks that never
// move, so the slices handed out stay valid. Blocks start small and double
// up to arenaBlock: a body with one escaped string must not cost 64 KiB.
type arena struct{ block []byte }

const (
	arenaFirst = 1 << 10
	arenaBlock = 64 << 10
)

func (a *arena) copy(s []byte) []byte {
	if cap(a.block)-len(a.block) < len(s) {
		size := min(max(2*cap(a.block), arenaFirst), arenaBlock)
		for size < len(s) {
			size *= 2
		}
		a.block = make([]byte, 0, size)
	}
	start := len(a.block)
	a.block = append(a.block, s...)
	return a.block[start:len(a.block):len(a.block)]
}
