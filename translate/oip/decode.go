package oip

import (
	"encoding/binary"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// DecodeResponse decodes a v2 infer response into its output tensors, in
// the response's order (docs/open-inference-protocol.md §6.2). headerLength is the
// Inference-Header-Content-Length value (see ParseHeaderLength), or -1
// when the response had none and the whole body is JSON.
//
// Each output whose parameters carry binary_data_size takes the next that
// many bytes after the JSON (checked against what is left first; 0 is an
// empty tensor); the others are read from "data" (see decodeData). Fixed
// size data and BYTES elements alias body, which the caller keeps alive
// and unmodified while the tensors are in use.
//
// sig may be nil. When it declares an output of rank 1 and the response
// has shape [N,1], the shape is reported as [N]: MLServer reshapes 1-D
// numpy outputs that way (docs/open-inference-protocol.md §6.3). Element counts are checked against
// lim.MaxElements, and sizes against the bytes that arrived, before
// anything is allocated. Errors are *apierr.Error with code BadGateway.
func DecodeResponse(body []byte, headerLength int, sig *tensor.Signature, lim tensor.Limits) ([]tensor.Tensor, error) {
	header, bin := body, []byte(nil)
	switch {
	case headerLength == -1:
	case headerLength > 0 && headerLength <= len(body):
		header, bin = body[:headerLength], body[headerLength:]
	default:
		return nil, badResponse(nil, "JSON header length %d does not fit a body of %d bytes", headerLength, len(body))
	}
	d := decoder{bin: bin, sig: sig, lim: lim.OrDefault()}
	return d.decode(header)
}

// Block is one binary block announced by a response's JSON header.
type Block struct {
	// Output is the index of the output the block belongs to.
	Output int
	// Size is the block's binary_data_size.
	Size uint64
}

// ResponseHeader is a binary response's JSON header decoded before its
// binary section has arrived (DecodeResponseHeader).
type ResponseHeader struct {
	// Outputs are the outputs, in the response's order: those with JSON
	// "data" complete, those with a binary block without their data
	// (FillBytes fills a BYTES one; fixed-size data is the caller's to
	// place, Size bytes of it).
	Outputs []tensor.Tensor
	// Blocks are the binary blocks in body order.
	Blocks []Block
}

// DecodeResponseHeader decodes the JSON header of a binary v2 response
// (the first Inference-Header-Content-Length bytes) as DecodeResponse
// would if every binary block announced were there: every check that
// needs only the header is made (names, datatypes, shapes against
// lim.MaxElements, a fixed-size block's size against its shape, a BYTES
// block's size against its element count, duplicate names). What needs the
// binary section is the caller's: FillBytes for BYTES blocks, the total
// length against the blocks' sizes.
//
// final reports that an error is the one DecodeResponse returns for every
// body that starts with this header: the failed check comes before
// anything DecodeResponse reads from the binary section (a non-empty
// block, the section's total length), so nothing there can make it fail
// first. Errors are *apierr.Error
// with code BadGateway, DecodeResponse's texts.
func DecodeResponseHeader(header []byte, sig *tensor.Signature, lim tensor.Limits) (h ResponseHeader, final bool, err error) {
	d := decoder{lazy: true, sig: sig, lim: lim.OrDefault()}
	h.Outputs, err = d.decode(header)
	if err != nil {
		return ResponseHeader{}, !d.needsData, err
	}
	h.Blocks = d.blocks
	return h, false, nil
}

// decoder holds the state of one DecodeResponse read.
type decoder struct {
	r     *jsontext.Pull
	bin   []byte // the binary section after the JSON header
	off   int    // bytes of bin consumed so far
	sig   *tensor.Signature
	lim   tensor.Limits
	total int64 // elements decoded so far, against lim.MaxElements

	// lazy: the binary section has not arrived; blocks are recorded in
	// blocks, and needsData is set once a non-empty one is met (from
	// there on, DecodeResponse's outcome depends on the binary section).
	lazy      bool
	blocks    []Block
	needsData bool
}

// decode decodes the header's outputs, taking their blocks from d.bin (or,
// lazily, only recording them). It reads the header once, straight off
// jsontext's tokenizer: each output's fields are taken as they come and
// its "data" converted into the tensor as it is read (read again from its
// text only in the rare body that sends it before the datatype or shape).
// The checks keep their order whatever the member order: JSON syntax
// anywhere first, then the root, then every output's form (an object with
// at least three members), then the outputs one by one, each name,
// datatype, shape, parameters, data.
func (d *decoder) decode(header []byte) ([]tensor.Tensor, error) {
	d.r = pullPool.Get().(*jsontext.Pull)
	defer pullPool.Put(d.r)
	d.r.Reset(header, jsontext.ForElements(d.lim.MaxDepth, d.lim.MaxElements))
	outs, err := d.root()
	if serr := d.r.Err(); serr != nil {
		d.needsData = false
		if len(header) == 0 {
			return nil, badResponse(serr, "empty body")
		}
		return nil, badResponse(serr, "malformed JSON: %v", serr)
	}
	if err != nil {
		return nil, err
	}
	if d.lazy {
		// The binary section's length is checked here, before what follows.
		d.needsData = true
	} else if d.off != len(d.bin) {
		return nil, badResponse(nil, "%d bytes of binary data follow the last output", len(d.bin)-d.off)
	}
	if name, dup := duplicateName(outs); dup {
		return nil, badResponse(nil, "output '%s' appears twice", clip(name, 64))
	}
	return outs, nil
}

// early is an error that comes before any output is decoded, whatever
// was decoded already: the blocks met so far do not count.
func (d *decoder) early(format string, args ...any) error {
	d.needsData = false
	return badResponse(nil, format, args...)
}

// root reads the root object; the first "outputs" member is the list of
// outputs (FindMember's). A syntax error returns nothing: decode reports
// it.
func (d *decoder) root() ([]tensor.Tensor, error) {
	r := d.r
	tok, ok := r.Next()
	if !ok {
		return nil, nil
	}
	if tok.Kind != jsontext.BeginObject {
		if !r.Skip(tok) {
			return nil, nil
		}
		return nil, d.early("the JSON is a %v, not an object", tok.ValueKind())
	}
	var outs []tensor.Tensor
	var err error
	seen, list := false, false
	for {
		if tok, ok = r.Next(); !ok {
			return nil, nil
		}
		if tok.Kind == jsontext.EndObject {
			break
		}
		isOutputs := !seen && string(tok.Str) == "outputs"
		if tok, ok = r.Next(); !ok {
			return nil, nil
		}
		switch {
		case !isOutputs:
			ok = r.Skip(tok)
		case tok.Kind != jsontext.BeginArray:
			seen = true
			ok = r.Skip(tok)
		default:
			seen, list = true, true
			outs, ok, err = d.outputs()
		}
		if !ok {
			return nil, nil
		}
	}
	if end := r.Pos(); !onlySpace(r.Text()[end:]) {
		return nil, d.early("unexpected data after the JSON at offset %d", end)
	}
	if !list {
		return nil, d.early("no \"outputs\" list")
	}
	return outs, err
}

// outputs reads the list of outputs. Every real output is an object with
// at least a name, datatype and shape: the first that is not is the error,
// before any output's own; an output is decoded once it has been read,
// until one fails. ok is false at a syntax error.
func (d *decoder) outputs() (outs []tensor.Tensor, ok bool, err error) {
	r := d.r
	var formErr error
	outs = []tensor.Tensor{}
	for i := 0; ; i++ {
		tok, ok := r.Next()
		if !ok {
			return nil, false, nil
		}
		if tok.Kind == jsontext.EndArray {
			break
		}
		var o output
		members := 0
		if tok.Kind == jsontext.BeginObject {
			members, ok = d.readOutput(&o, formErr == nil && err == nil)
		} else {
			ok = r.Skip(tok)
		}
		if !ok {
			return nil, false, nil
		}
		switch {
		case members < 3:
			if formErr == nil {
				formErr = d.early("output %d is not an object with a name, datatype and shape", i)
			}
		case formErr == nil && err == nil:
			outs = append(outs, tensor.Tensor{})
			err = d.output(&outs[len(outs)-1], i, &o)
		}
	}
	if formErr != nil {
		return nil, true, formErr
	}
	return outs, true, err
}

// output is what one output object says, as read: the first member of
// each name counts (FindMember's).
type output struct {
	name, datatype field
	shape          field
	dims           []int64
	badDim         []byte // the text of the first dimension that is not one
	params         field
	size           field // parameters.binary_data_size
	base64         bool  // parameters.content_type is "base64"
	ctSeen         bool
	data           data
}

// field is one member's value: its kind, its string (String) or number
// (Number), and its text.
type field struct {
	seen bool
	kind jsontext.Kind
	str  []byte
	num  jsontext.Num
	raw  []byte
}

// readField reads the value starting with tok into f (f.seen: a later
// duplicate is only skipped).
func readField(r *jsontext.Pull, f *field, tok jsontext.Token) bool {
	if f.seen {
		return r.Skip(tok)
	}
	start := int(tok.Off)
	f.seen, f.kind, f.num = true, tok.ValueKind(), tok.Num
	if tok.Kind == jsontext.StringValue {
		f.str = own(tok)
	}
	ok := r.Skip(tok)
	f.raw = r.Text()[start:r.Pos()]
	return ok
}

// readOutput reads an output object after its '{' into o and returns its
// member count. When live, its data is converted as it is read if the
// datatype and shape came first.
func (d *decoder) readOutput(o *output, live bool) (members int, ok bool) {
	r := d.r
	for {
		key, ok := r.Next()
		if !ok || key.Kind == jsontext.EndObject {
			return members, ok
		}
		members++
		tok, ok := r.Next()
		if !ok {
			return members, false
		}
		switch string(key.Str) {
		case "name":
			ok = readField(r, &o.name, tok)
		case "datatype":
			ok = readField(r, &o.datatype, tok)
		case "shape":
			if o.shape.seen || tok.Kind != jsontext.BeginArray {
				ok = readField(r, &o.shape, tok)
				break
			}
			o.shape.seen, o.shape.kind = true, jsontext.Array
			ok = readDims(r, o)
		case "parameters":
			if o.params.seen || tok.Kind != jsontext.BeginObject {
				ok = readField(r, &o.params, tok)
				break
			}
			o.params.seen, o.params.kind = true, jsontext.Object
			ok = readParams(r, o)
		case "data":
			ok = d.readData(o, tok, live)
		default:
			ok = r.Skip(tok)
		}
		if !ok {
			return members, false
		}
	}
}

// readDims reads the shape's list after its '['.
func readDims(r *jsontext.Pull, o *output) bool {
	o.dims = make([]int64, 0, 4)
	for {
		tok, ok := r.Next()
		if !ok || tok.Kind == jsontext.EndArray {
			return ok
		}
		start := int(tok.Off)
		if !r.Skip(tok) {
			return false
		}
		if o.badDim == nil {
			if !tok.Num.IsInt64() || tok.Num.Int64() < 0 {
				o.badDim = r.Text()[start:r.Pos()]
			} else {
				o.dims = append(o.dims, tok.Num.Int64())
			}
		}
	}
}

// readParams reads the parameters object after its '{'.
func readParams(r *jsontext.Pull, o *output) bool {
	for {
		key, ok := r.Next()
		if !ok || key.Kind == jsontext.EndObject {
			return ok
		}
		tok, ok := r.Next()
		if !ok {
			return false
		}
		switch string(key.Str) {
		case "binary_data_size":
			ok = readField(r, &o.size, tok)
		case "content_type":
			if !o.ctSeen && tok.Kind == jsontext.StringValue {
				o.base64 = string(tok.Str) == "base64"
			}
			o.ctSeen = true
			ok = r.Skip(tok)
		default:
			ok = r.Skip(tok)
		}
		if !ok {
			return false
		}
	}
}

// output checks an output that has been read and decodes it into t.
func (d *decoder) output(t *tensor.Tensor, i int, o *output) error {
	if o.name.kind != jsontext.String || len(o.name.str) == 0 {
		return badResponse(nil, "output %d has no name", i)
	}
	spec := d.outputSpec(o.name.str)
	if spec != nil {
		t.Name = spec.Name // no allocation for the common case
	} else {
		t.Name = string(o.name.str)
	}
	if o.datatype.kind != jsontext.String {
		return badResponse(nil, "output '%s' has no datatype", clip(t.Name, 64))
	}
	var ok bool
	if t.DataType, ok = tensor.ParseV2(string(o.datatype.str)); !ok {
		return badResponse(nil, "output '%s' has unknown datatype '%s'", clip(t.Name, 64), clip(string(o.datatype.str), 32))
	}
	n, err := d.shape(t, o)
	if err != nil {
		return err
	}
	size, hasSize := uint64(0), false
	switch {
	case !o.params.seen || o.params.kind == jsontext.Null:
	case o.params.kind != jsontext.Object:
		return badResponse(nil, "output '%s' has parameters that are not an object", clip(t.Name, 64))
	case o.size.seen && o.size.kind != jsontext.Null:
		if !o.size.num.IsUint64() {
			return badResponse(nil, "output '%s' has an invalid binary_data_size %s", clip(t.Name, 64), clip(string(o.size.raw), 32))
		}
		size, hasSize = o.size.num.Uint64(), true
	}
	if hasSize {
		err = d.binaryBlock(t, i, n, size)
	} else {
		err = d.decodeData(t, o, n)
	}
	if err != nil {
		return err
	}
	// MLServer reports a 1-D output [N] as [N,1]; give the client the
	// model's declared rank back.
	if spec != nil && len(spec.Shape) == 1 && len(t.Shape) == 2 && t.Shape[1] == 1 &&
		(spec.Shape[0] == -1 || spec.Shape[0] == t.Shape[0]) {
		t.Shape = t.Shape[:1:1]
	}
	return nil
}

// outputSpec returns the signature's spec for the output named name.
// When the model map renamed tensors (sig.Wire), name is looked up among
// the v2 names and the spec returned carries the TF name, so the output,
// and every error that names it, speaks the client's names.
func (d *decoder) outputSpec(name []byte) *tensor.Spec {
	if d.sig == nil {
		return nil
	}
	wire := d.sig.OnWire()
	for i := range wire.Outputs {
		if wire.Outputs[i].Name == string(name) && i < len(d.sig.Outputs) {
			return &d.sig.Outputs[i]
		}
	}
	return nil
}

// shape checks the output's shape and returns its element count,
// counted against lim.MaxElements before any data is allocated.
func (d *decoder) shape(t *tensor.Tensor, o *output) (int64, error) {
	if o.shape.kind != jsontext.Array {
		return 0, badResponse(nil, "output '%s' has no shape", clip(t.Name, 64))
	}
	if o.badDim != nil {
		return 0, badResponse(nil, "output '%s' has an invalid dimension %s", clip(t.Name, 64), clip(string(o.badDim), 32))
	}
	t.Shape = o.dims[:len(o.dims):len(o.dims)]
	n, ok := d.elements(o)
	if !ok {
		_, err := tensor.NumElements(t.Shape)
		return 0, badResponse(err, "output '%s' has shape %v, more than the limit of %d elements", clip(t.Name, 64), t.Shape, d.lim.MaxElements)
	}
	d.total += n
	return n, nil
}

// binaryBlock takes the output's block from the binary section: fixed-size
// data aliased as is, BYTES split at their 4-byte little-endian length
// prefixes, every length checked before it is used.
//
// Lazily, the block is only recorded and its size checked.
func (d *decoder) binaryBlock(t *tensor.Tensor, i int, n int64, size uint64) error {
	var block []byte
	if d.lazy {
		d.blocks = append(d.blocks, Block{Output: i, Size: size})
		d.needsData = d.needsData || size > 0
	} else {
		rest := uint64(len(d.bin) - d.off)
		if size > rest {
			return badResponse(nil, "output '%s' announces %d bytes of binary data but only %d remain", clip(t.Name, 64), size, rest)
		}
		block = d.bin[d.off : d.off+int(size) : d.off+int(size)]
		d.off += int(size)
	}
	if t.DataType != tensor.Bytes {
		if want := uint64(n) * uint64(t.DataType.Size()); size != want {
			return badResponse(nil, "output '%s' has %d bytes of binary data, shape %v of %v needs %d", clip(t.Name, 64), size, t.Shape, t.DataType, want)
		}
		if n > 0 {
			t.Data = block
		}
		return nil
	}
	// Every element takes at least its 4-byte prefix: a count the block
	// cannot hold is rejected before the element list is allocated.
	if uint64(n) > size/4 {
		return badResponse(nil, "output '%s' has %d bytes of binary data, too few for %d BYTES elements", clip(t.Name, 64), size, n)
	}
	if n == 0 || d.lazy {
		return nil
	}
	return FillBytes(t, block)
}

// FillBytes splits a BYTES output's complete binary block into its
// elements (4-byte little-endian length, then the bytes; the elements
// alias block), as many as t's shape holds, every length checked before
// it is used. Errors are DecodeResponse's.
func FillBytes(t *tensor.Tensor, block []byte) error {
	n, err := tensor.NumElements(t.Shape)
	if err != nil || n == 0 {
		return err
	}
	strs := make([][]byte, n)
	p := block
	for i := range strs {
		if len(p) < 4 {
			return badResponse(nil, "output '%s': BYTES element %d has an incomplete length prefix", clip(t.Name, 64), i)
		}
		l := binary.LittleEndian.Uint32(p)
		p = p[4:]
		if uint64(l) > uint64(len(p)) {
			return badResponse(nil, "output '%s': BYTES element %d announces %d bytes but only %d remain", clip(t.Name, 64), i, l, len(p))
		}
		strs[i] = p[:l:l]
		p = p[l:]
	}
	if len(p) != 0 {
		return badResponse(nil, "output '%s': %d bytes of binary data follow its %d BYTES elements", clip(t.Name, 64), len(p), n)
	}
	t.Strings = strs
	return nil
}

// duplicateName reports a name used by two outputs.
func duplicateName(ts []tensor.Tensor) (string, bool) {
	if len(ts) <= 16 {
		for i := range ts {
			for j := i + 1; j < len(ts); j++ {
				if ts[i].Name == ts[j].Name {
					return ts[i].Name, true
				}
			}
		}
		return "", false
	}
	seen := make(map[string]struct{}, len(ts))
	for i := range ts {
		if _, ok := seen[ts[i].Name]; ok {
			return ts[i].Name, true
		}
		seen[ts[i].Name] = struct{}{}
	}
	return "", false
}

func onlySpace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}
