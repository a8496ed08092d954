package tfrequest

import (
	"bytes"
	"slices"

	"github.com/tfsbridge/tfsbridge/translate/internal/jsontape"
	"github.com/tfsbridge/tfsbridge/translate/internal/oracle"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// The tape parser: TF Serving's FillPredictRequestFromJson written as its
// control flow over a parsed document (jsontape.Parse), check for check.
// It was production's exact parser before the decoder decided every body;
// it stays as the test oracle the differential tests hold the decoder to
// (whole, chunked and streamed bodies alike).

// tapeParse is Parse as TF's control flow. The document is never
// released (its strings may back the Request): the collector takes it.
func tapeParse(body []byte, resolve Resolver, lim tensor.Limits) (*Request, error) {
	lim = lim.OrDefault()
	doc, err := oracle.ParseJSON(body, lim)
	if err != nil {
		return nil, err
	}
	r := &Request{}
	if err := r.parse(doc, resolve, lim); err != nil {
		r.Release()
		return nil, err
	}
	return r, nil
}

func (r *Request) parse(doc *jsontape.Document, resolve Resolver, lim tensor.Limits) error {
	root := doc.Root()
	if root.Kind() != jsontext.Object {
		return oracle.FormatError(root, msgNotObject)
	}
	if v, ok := root.Member(keySignature); ok {
		if v.Kind() != jsontext.String {
			return oracle.FormatError(root, msgSignatureType)
		}
		r.SignatureName = string(v.Str())
	}
	sig, err := resolve(r.SignatureName)
	if err != nil {
		return err
	}
	if sig == nil || len(sig.Inputs) == 0 {
		return errNoInputMap(r.SignatureName)
	}
	r.Signature = sig

	instances, hasInstances := root.Member(keyInstances)
	inputs, hasInputs := root.Member(keyInputs)
	p := &filler{req: r, doc: doc, sig: sig, lim: lim}
	p.init()
	switch {
	case hasInstances && hasInputs:
		return oracle.FormatError(root, msgBothKeys)
	case hasInstances:
		if instances.Kind() != jsontext.Array {
			return oracle.FormatError(root, msgInstancesType)
		}
		if instances.Len() == 0 {
			return oracle.FormatError(root, msgInstancesEmpty)
		}
		r.Format = tfjson.Row
		err = p.rows(instances)
	case hasInputs:
		r.Format = tfjson.Columnar
		err = p.columns(inputs)
	default:
		return errMissingKey()
	}
	if err != nil {
		return err
	}
	if err := p.finish(); err != nil {
		return err
	}
	return verifyInputsSize(sig, r.Inputs)
}

// filler builds the input tensors of one request: json_tensor.cc's
// FillTensorMapFromInstancesList / FillTensorMapFromInputsMap,
// AddInstanceItem, GetDenseTensorShape, FillTensorProto and
// AddValueToTensor, over the parsed document.
type filler struct {
	req   *Request
	doc   *jsontape.Document
	sig   *tensor.Signature
	lim   tensor.Limits
	ins   []input // parallel to sig.Inputs
	batch int64   // row format: len(instances)
	total int64   // values appended so far, all inputs
	shape []int64 // scratch for GetDenseTensorShape
}

func (p *filler) init() {
	p.ins = make([]input, len(p.sig.Inputs))
	for i := range p.ins {
		p.ins[i].spec = &p.sig.Inputs[i]
	}
}

// lookup returns the index of the signature input named name, or -1.
func (p *filler) lookup(name []byte) int {
	for i := range p.ins {
		if p.ins[i].spec.Name == string(name) {
			return i
		}
	}
	return -1
}

// rowKey is an instance object's key as TF reads it: rapidjson's
// GetString() turned into a std::string, that is as a C string, so the key
// ends at its first NUL ({"x\u0000junk": 1} names input "x"; docs/tfserving-rest.md §4.1).
// Two keys that differ only after a NUL then name the same input, which
// behaves as a duplicated key: both values are added. Columnar names and
// "b64" are looked up with their full length (FindMember) and keep it.
func rowKey(k jsontape.Value) []byte {
	s := k.Str()
	if i := bytes.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// isElementObject tells a named-inputs instance object from a value.
func isElementObject(v jsontape.Value) bool {
	return v.Kind() == jsontext.Object && !oracle.IsBase64Object(v)
}

// rows fills the tensors from a non-empty "instances" array.
func (p *filler) rows(list jsontape.Value) error {
	first, _ := list.First()
	// TF tests IsObject here, not IsElementObject: a leading b64 object
	// slips past this check even with several inputs (docs/tfserving-rest.md §4.2).
	if first.Kind() != jsontext.Object && len(p.ins) > 1 {
		return errInstancesPlain()
	}
	objects := isElementObject(first)
	p.batch = int64(list.Len())
	for i, elem := range list.Elems() {
		if !objects {
			if isElementObject(elem) {
				return errExpectValue(int64(i))
			}
			// TF feeds "tensorinfo_map.begin()", an arbitrary input when
			// there are several; the first signature input here. With
			// several inputs (only b64 objects get here) verifyInputsSize
			// then refuses the request.
			if err := p.addItem(0, elem); err != nil {
				return wrapElement(i, nil, err)
			}
			continue
		}
		if !isElementObject(elem) {
			return errExpectObject(int64(i))
		}
		for j := range p.ins {
			p.ins[j].inObj = false
		}
		// Every member is processed, duplicates included (TF iterates the
		// object, it does not look keys up).
		for k, v := range elem.Members() {
			name := rowKey(k)
			idx := p.lookup(name)
			var err error
			if idx < 0 {
				err = errNoNamedInput(name)
			} else {
				p.ins[idx].inObj = true
				err = p.addItem(idx, v)
			}
			if err != nil {
				return wrapElement(i, name, err)
			}
		}
		for j := range p.ins {
			if !p.ins[j].inObj {
				return errKeysMissing(int64(i), jsontape.AppendDump(nil, elem), sortedNames(len(p.ins), func(i int) string { return p.ins[i].spec.Name }))
			}
		}
	}
	return nil
}

// addItem is AddInstanceItem: one instance's value for input idx, whose
// size and then shape must match the first instance's.
func (p *filler) addItem(idx int, item jsontape.Value) error {
	in := &p.ins[idx]
	in.used = true
	shape := denseShape(item, p.shape[:0])
	p.shape = shape
	before := p.total
	if err := p.fill(in, item, 0, shape); err != nil {
		return err
	}
	size := p.total - before
	if !in.seen {
		in.seen = true
		in.size = size
		in.shape = append(in.shape[:0], shape...)
		p.reserve(in, size*(p.batch-1))
		return nil
	}
	if in.size != size || !slices.Equal(in.shape, shape) {
		return errItem(in.size, size, in.shape, shape)
	}
	return nil
}

// reserve grows in's buffer for n more values when that stays within the
// element limit, so a row-format batch is filled without regrowing.
func (p *filler) reserve(in *input, n int64) {
	if n <= 0 || p.total+n > p.lim.MaxElements {
		return
	}
	if in.spec.DataType == tensor.Bytes {
		in.strs = slices.Grow(in.strs, int(n))
		return
	}
	p.ensureBuf(in)
	in.data = slices.Grow(in.data, int(n)*in.spec.DataType.Size())
}

// ensureBuf gives in a pooled data buffer. With a single input every
// number of the document is one of its elements at most, so the count the
// syntax pass made sizes the buffer in one go.
func (p *filler) ensureBuf(in *input) {
	if in.buf != nil {
		return
	}
	in.buf = getBuf()
	in.data = (*in.buf)[:0]
	p.req.bufs = append(p.req.bufs, in.buf)
}

// columns fills the tensors from the "inputs" value.
func (p *filler) columns(v jsontape.Value) error {
	if v.Kind() != jsontext.Object || oracle.IsBase64Object(v) {
		if len(p.ins) > 1 {
			return errInputsPlain()
		}
		return p.whole(0, v)
	}
	// TF walks its input map (unordered); signature order here.
	for idx := range p.ins {
		name := p.ins[idx].spec.Name
		item, ok := v.Member(name)
		if !ok {
			return errMissingNamedInput(name)
		}
		if err := p.whole(idx, item); err != nil {
			return err
		}
	}
	return nil
}

// whole fills input idx from one value holding the entire tensor.
func (p *filler) whole(idx int, v jsontape.Value) error {
	in := &p.ins[idx]
	in.used = true
	in.shape = denseShape(v, in.shape[:0])
	before := p.total
	if err := p.fill(in, v, 0, in.shape); err != nil {
		return err
	}
	in.size = p.total - before
	return nil
}

// denseShape is GetDenseTensorShape: the sizes of the first array at each
// nesting level, stopping at a non-array or an empty array.
func denseShape(v jsontape.Value, shape []int64) []int64 {
	for v.Kind() == jsontext.Array {
		shape = append(shape, int64(v.Len()))
		first, ok := v.First()
		if !ok {
			break
		}
		v = first
	}
	return shape
}

// fill is FillTensorProto: it checks that every array sits above the
// leaves with its level's inferred size and every scalar sits at the leaf
// level, and appends the values in document order.
func (p *filler) fill(in *input, v jsontape.Value, level int, shape []int64) error {
	rank := len(shape)
	if v.Kind() != jsontext.Array {
		if level != rank {
			return errLevel(jsontape.AppendDump(nil, v), level, rank)
		}
		return p.add(in, v)
	}
	if level >= rank {
		return errListLevel(level, rank)
	}
	n := v.Len()
	if int64(n) != shape[level] {
		return errListSize(int64(n), level, shape[level])
	}
	e, _ := v.First()
	for i := 0; i < n; i++ {
		if err := p.fill(in, e, level+1, shape); err != nil {
			return err
		}
		e = e.Next()
	}
	return nil
}

// typeError is json_tensor.cc's TypeError.
func typeError(v jsontape.Value, dt tensor.DataType) error {
	return errType(jsontape.AppendDump(nil, v), v.Kind(), dt)
}

// add appends one leaf value (AddValueToTensor, or a b64 object for a
// string input) and counts it.
func (p *filler) add(in *input, v jsontape.Value) error {
	if p.total >= p.lim.MaxElements {
		return errTooManyElements(p.lim.MaxElements)
	}
	dt := in.spec.DataType
	if dt == tensor.Bytes {
		switch {
		case v.Kind() == jsontext.String:
			in.strs = append(in.strs, v.Str())
		case v.Kind() != jsontext.Object:
			return typeError(v, dt)
		case !oracle.IsBase64Object(v):
			return errB64Format(jsontape.AppendDump(nil, v))
		default:
			b, _ := v.Member(tfjson.KeyB64)
			s := b.Str()
			out, ok := tfjson.AppendBase64(make([]byte, 0, len(s)/4*3+3), s)
			if !ok {
				return errB64Decode()
			}
			in.strs = append(in.strs, out)
		}
		p.total++
		return nil
	}
	if v.Kind() == jsontext.Object {
		return typeError(v, dt)
	}
	p.ensureBuf(in)
	d, res := appendLeaf(in.data, dt, v.Kind(), v.Num())
	switch res {
	case leafTypeError:
		return typeError(v, dt)
	case leafUnimplemented:
		return errUnimplemented(jsontape.AppendDump(nil, v), dt)
	}
	in.data = d
	p.total++
	return nil
}

// finish turns the accumulated values into tensors, in signature order.
func (p *filler) finish() error {
	buildTensors(p.req, len(p.ins), func(i int) *input { return &p.ins[i] }, p.batch, p.ensureBuf)
	return nil
}
