// Package tfexample parses the body of TF Serving's :classify and :regress
// requests ({"signature_name"?, "context"?, "examples": [...]}) with TF
// Serving's rules, order of checks and error texts (json_tensor.cc
// FillClassifyRegressRequestFromJson, docs/tfserving-rest.md §6.1), straight
// into serialized tf.Example protos: the BYTES input a classification or
// regression signature takes. It also says which v2 models can answer those
// verbs (signature.go).
//
// The protos are written with protowire as protobuf's deterministic
// serialization writes a tf.Example (map entries sorted by feature name), so
// the bytes are the same whatever the JSON member order; the package holds
// no generated code and no intermediate tree: one pass over the body's
// tokens (jsontext.Pull) writes each feature once.
package tfexample

import (
	"bytes"
	"slices"
	"sync"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// The request keys TF Serving reads (json_tensor.cc).
const (
	keySignature = "signature_name"
	keyContext   = "context"
	keyExamples  = "examples"
)

// DefaultMaxBytes bounds the serialized examples of one request when
// Options.MaxBytes is 0: the session's default body limit.
const DefaultMaxBytes = 64 << 20

// Options bound what one body may make Parse build.
type Options struct {
	// Limits bound JSON nesting and the element count: every example
	// and every feature value (the context's once per example) counts.
	Limits tensor.Limits
	// MaxBytes bounds the total size of the serialized examples, the
	// context's bytes counted once per example; 0 means DefaultMaxBytes.
	// A small body with a large context and many empty examples would
	// otherwise multiply into an unbounded v2 body.
	MaxBytes int64
}

// Request is a parsed classify or regress request.
type Request struct {
	// SignatureName is "signature_name" ("" when absent).
	SignatureName string
	// Examples holds one serialized tf.Example per element of "examples":
	// the context's serialization followed by the example's, which a
	// protobuf parser reads as their merge (an example's feature replaces
	// a context feature of the same name). The slices share one buffer.
	Examples [][]byte
}

// Parse parses a classify or regress request body check for check as TF
// Serving does: JSON syntax, top level is an object, signature_name is a
// string, then the context (when present), then "examples" must be a
// non-empty array of objects whose features are a scalar or a flat list of
// strings, b64 objects, integers, booleans or decimals (NaN and ±Infinity
// included), one kind per feature.
//
// It reads the body once, in document order, whatever order its members
// come in: facts and the first error of each part are recorded and judged
// at the end in TF's order (judge). The examples are written without the
// context, which is prepended to each at the end, so a context after the
// examples costs no second reading.
//
// Every failure is an *apierr.Error carrying TF Serving's message (400),
// or the limit of opt (400 for elements, 413 for bytes).
func Parse(body []byte, opt Options) (*Request, error) {
	opt.Limits = opt.Limits.OrDefault()
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = DefaultMaxBytes
	}
	if len(body) == 0 {
		return nil, tfjson.ErrEmptyBody()
	}
	p := &parser{r: pullPool.Get().(*jsontext.Pull), w: writer{opt: opt}}
	defer pullPool.Put(p.r)
	p.r.Reset(body, tfjson.Limits(opt.Limits))
	p.dump.Reset(nil)
	r, err := p.root()
	if serr := p.r.Err(); serr != nil {
		return nil, tfjson.SyntaxError(serr)
	}
	return r, err
}

var pullPool = sync.Pool{New: func() any { return new(jsontext.Pull) }}

// parser is one Parse: the reader, the root's dump (TF's FormatError
// prints it), the writer and what the root's members said.
type parser struct {
	r    *jsontext.Pull
	dump jsontext.DumpStream
	w    writer

	sigBad        bool // the first "signature_name" is no string
	ctxSeen       bool
	ctxErr        error
	ctx           []byte // the context's serialization
	ctxValues     int64
	exSeen, exBad bool  // the first "examples"; no list
	n             int64 // its elements
	done          []tally
	stopped       bool  // an example failed, or the limits are passed already
	stop          tally // the charges before it failed
	stopErr       error
}

// tally is what has been charged against the limits.
type tally struct{ values, size int64 }

// next returns the next token, fed to the root's dump until that is full.
func (p *parser) next() (jsontext.Token, bool) {
	tok, ok := p.r.Next()
	if ok && !p.dump.Full() {
		p.dump.Feed(tok)
	}
	return tok, ok
}

// skip reads the rest of the value tok starts.
func (p *parser) skip(tok jsontext.Token) bool {
	switch tok.Kind {
	case jsontext.BeginArray, jsontext.BeginObject:
		return p.skipOut(1)
	}
	return true
}

// skipOut reads on to the end of the n innermost open containers.
func (p *parser) skipOut(n int) bool {
	for n > 0 {
		tok, ok := p.next()
		if !ok {
			return false
		}
		switch tok.Kind {
		case jsontext.BeginArray, jsontext.BeginObject:
			n++
		case jsontext.EndArray, jsontext.EndObject:
			n--
		}
	}
	return true
}

// root reads the body; the first member of each name counts (FindMember).
// A syntax error returns nothing: Parse reports it.
func (p *parser) root() (*Request, error) {
	tok, ok := p.next()
	if !ok {
		return nil, nil
	}
	if tok.Kind != jsontext.BeginObject {
		if !p.skip(tok) {
			return nil, nil
		}
		return nil, p.rootErr("Is not object")
	}
	r := &Request{}
	sigSeen := false
	for {
		if tok, ok = p.next(); !ok {
			return nil, nil
		}
		if tok.Kind == jsontext.EndObject {
			break
		}
		key := string(tok.Str)
		if tok, ok = p.next(); !ok {
			return nil, nil
		}
		switch {
		case key == keySignature && !sigSeen:
			sigSeen = true
			if tok.Kind == jsontext.StringValue {
				r.SignatureName = string(tok.Str)
			} else {
				p.sigBad = true
				ok = p.skip(tok)
			}
		case key == keyContext && !p.ctxSeen:
			p.ctxSeen = true
			var t tally
			p.ctx, ok, p.ctxErr = p.w.example(p, tok, nil, &t)
			p.ctxValues = t.values
		case key == keyExamples && !p.exSeen:
			p.exSeen = true
			if tok.Kind == jsontext.BeginArray {
				ok = p.examples(len(p.r.Text()))
			} else {
				p.exBad = true
				ok = p.skip(tok)
			}
		default:
			ok = p.skip(tok)
		}
		if !ok {
			return nil, nil
		}
	}
	return r, p.judge(r)
}

func (p *parser) rootErr(msg string) error {
	return tfjson.FormatDumpError(p.dump.Bytes(), msg)
}

// examples reads the "examples" list after its '[', writing each example
// (without the context) to w.out and recording the charges after it,
// until one fails. Once more examples than the element limit have been
// read, the limit is passed whatever follows: the rest is only counted.
func (p *parser) examples(bodyLen int) bool {
	w := &p.w
	// The examples take about as many bytes as their JSON text: one
	// allocation up front instead of a doubling series.
	w.out = slices.Grow(w.out[:0], int(min(int64(bodyLen), w.opt.MaxBytes)))
	var t tally
	for {
		tok, ok := p.next()
		if !ok {
			return false
		}
		if tok.Kind == jsontext.EndArray {
			return true
		}
		if p.n++; p.stopped || p.n > w.opt.Limits.MaxElements {
			p.stopped = true
			if !p.skip(tok) {
				return false
			}
			continue
		}
		var err error
		if w.out, ok, err = w.example(p, tok, w.out, &t); !ok {
			return false
		}
		if err != nil {
			p.stopped, p.stop, p.stopErr = true, t, err
			continue
		}
		p.done = append(p.done, t)
	}
}

// judge answers in TF's order, now that the whole body has been read:
// the root's checks, the context, "examples", the limits (the context
// charged once per example up front, then each example's values and
// bytes), each example; then it builds the Request.
func (p *parser) judge(r *Request) error {
	switch {
	case p.sigBad:
		return p.rootErr("not formatted correctly. 'signature_name' key must be a string value.")
	case p.ctxErr != nil:
		return p.ctxErr
	case !p.exSeen:
		return p.rootErr("When method is classify, key 'examples' is expected and was not found")
	case p.exBad:
		return p.rootErr("Expecting 'examples' value to be an list/array")
	case p.n == 0:
		return p.rootErr("'examples' value is an empty array")
	}
	w, n, ctx := &p.w, p.n, p.ctx
	base := tally{n * (1 + p.ctxValues), n * int64(len(ctx))}
	over := func(t tally) error {
		return w.charge(&tally{base.values + t.values, base.size + t.size}, 0, 0)
	}
	if err := over(tally{}); err != nil {
		return err
	}
	for _, t := range p.done {
		if err := over(t); err != nil {
			return err
		}
	}
	if p.stopped {
		if err := over(p.stop); err != nil {
			return err
		}
		return p.stopErr
	}
	out := w.out
	if len(ctx) > 0 {
		out = make([]byte, 0, int64(len(w.out))+base.size)
	}
	r.Examples = make([][]byte, n)
	start := 0
	for i, t := range p.done {
		end := int(t.size)
		if len(ctx) > 0 {
			out = append(out, ctx...)
			out = append(out, w.out[start:end]...)
			r.Examples[i] = out[len(out)-(end-start)-len(ctx) : len(out) : len(out)]
		} else {
			r.Examples[i] = out[start:end:end]
		}
		start = end
	}
	return nil
}

// writer serializes examples, with scratch space for the features of the
// example being written.
type writer struct {
	opt Options
	out []byte // the examples

	feats   []byte  // the encoded Feature messages of the current example
	names   []byte  // the names of its features
	entries []entry // where each of them is, by name
	list    []byte  // the payload of the current feature's list
	b64     []byte  // a decoded b64 value
	b64src  []byte  // the string of a b64 value, when it is escaped
	sorted  []entry // entries after sorting and dropping duplicates
}

// entry is one feature of the current example: its name in writer.names
// and its Feature message in writer.feats. No pointers, so sorting entries
// costs no write barriers.
type entry struct {
	nameStart, nameEnd int32
	start, end         int32
}

// charge counts elements and bytes into t against the limits.
func (w *writer) charge(t *tally, elements, size int64) error {
	t.values += elements
	t.size += size
	if t.values > w.opt.Limits.MaxElements {
		return apierr.InvalidArgumentf("Request holds more than %d tensor elements, the limit of this server", w.opt.Limits.MaxElements)
	}
	if t.size > w.opt.MaxBytes {
		return apierr.Errorf(apierr.PayloadTooLarge, "Request examples serialize to more than %d bytes, the limit of this server", w.opt.MaxBytes)
	}
	return nil
}

// example is MakeExampleFromJsonObject over the value tok starts: it
// appends its tf.Example to dst, charging t. Features are written in name
// order and a repeated name keeps its last value (the proto map assignment
// TF Serving makes); an empty object is an Example without features, which
// serializes to nothing. After an error the rest of the value is read
// (skipped); ok is false at a syntax error.
func (w *writer) example(p *parser, tok jsontext.Token, dst []byte, t *tally) (out []byte, ok bool, err error) {
	if tok.Kind != jsontext.BeginObject {
		return dst, p.skip(tok), apierr.InvalidArgumentf("Example must be JSON object but got JSON %s", tok.ValueKind())
	}
	w.feats, w.names, w.entries = w.feats[:0], w.names[:0], w.entries[:0]
	for {
		key, ok := p.next()
		if !ok {
			return dst, false, nil
		}
		if key.Kind == jsontext.EndObject {
			break
		}
		// rapidjson's GetString() becomes a std::string from a C string:
		// the name ends at its first NUL.
		name := key.Str
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		w.names = append(w.names, name...)
		name = w.names[len(w.names)-len(name):]
		start := len(w.feats)
		if ok, err = w.feature(p, name, t); err != nil || !ok {
			return dst, ok && p.skipOut(1), err
		}
		w.entries = append(w.entries, entry{int32(len(w.names) - len(name)), int32(len(w.names)), int32(start), int32(len(w.feats))})
	}
	if len(w.entries) == 0 {
		return dst, true, nil
	}
	// Stable sort (most requests are already in order), then keep the
	// last of each run of equal names.
	byName := func(a, b entry) int { return bytes.Compare(w.name(a), w.name(b)) }
	if !slices.IsSortedFunc(w.entries, byName) {
		slices.SortStableFunc(w.entries, byName)
	}
	w.sorted = w.sorted[:0]
	for i, e := range w.entries {
		if i+1 < len(w.entries) && byName(w.entries[i+1], e) == 0 {
			continue
		}
		w.sorted = append(w.sorted, e)
	}
	featuresLen := 0
	for _, e := range w.sorted {
		featuresLen += sizeField(w.mapEntryLen(e))
	}
	if err := w.charge(t, 0, int64(sizeField(featuresLen))); err != nil {
		return dst, true, err
	}
	// Example.features (1) → Features.feature (1): map<string, Feature>,
	// each entry a message {key (1), value (2)}.
	dst = appendLen(dst, fieldExampleFeatures, featuresLen)
	for _, e := range w.sorted {
		dst = appendLen(dst, fieldFeaturesFeature, w.mapEntryLen(e))
		dst = appendBytes(dst, fieldMapKey, w.name(e))
		dst = appendBytes(dst, fieldMapValue, w.feats[e.start:e.end])
	}
	return dst, true, nil
}

func (w *writer) name(e entry) []byte { return w.names[e.nameStart:e.nameEnd] }

func (w *writer) mapEntryLen(e entry) int {
	return sizeField(int(e.nameEnd-e.nameStart)) + sizeField(int(e.end-e.start))
}

// kind is a Feature's oneof case, numbered as its field.
type kind uint8

const (
	kindNone  kind = 0
	kindBytes kind = fieldFeatureBytesList
	kindFloat kind = fieldFeatureFloatList
	kindInt64 kind = fieldFeatureInt64List
)

var kindNames = [...]string{kindNone: "UNKNOWN", kindBytes: "bytes", kindFloat: "float", kindInt64: "int64"}

// feature appends to w.feats the Feature message of the feature value
// read next: a scalar is a one-element list, [] a Feature with no kind.
// After an error the rest of a list is skipped.
func (w *writer) feature(p *parser, name []byte, t *tally) (bool, error) {
	w.list = w.list[:0]
	k, count := kindNone, int64(0)
	tok, ok := p.next()
	if !ok {
		return false, nil
	}
	var err error
	if tok.Kind != jsontext.BeginArray {
		count++
		if k, ok, err = w.value(p, name, k, tok); err != nil || !ok {
			return ok, err
		}
	} else {
		for {
			if tok, ok = p.next(); !ok {
				return false, nil
			}
			if tok.Kind == jsontext.EndArray {
				break
			}
			count++
			if k, ok, err = w.value(p, name, k, tok); err != nil || !ok {
				return ok && p.skipOut(1), err
			}
		}
	}
	// Only the values: the bytes are charged once the example is whole
	// (its scratch space is within a small factor of its JSON text).
	if err := w.charge(t, count, 0); err != nil {
		return true, err
	}
	if k == kindNone {
		return true, nil // Feature{}: an empty message
	}
	listLen := len(w.list)
	if k != kindBytes {
		// FloatList and Int64List hold one packed field.
		listLen = sizeField(len(w.list))
	}
	w.feats = appendLen(w.feats, int(k), listLen)
	if k != kindBytes {
		w.feats = appendLen(w.feats, fieldListValue, len(w.list))
	}
	w.feats = append(w.feats, w.list...)
	return true, nil
}

// value is AddValueToFeature: it checks the element tok starts (and reads
// it whole) against the kind the feature has so far (kindNone before its
// first value) and appends it to w.list, returning the feature's kind.
func (w *writer) value(p *parser, name []byte, k kind, tok jsontext.Token) (kind, bool, error) {
	var want kind
	var b64 []byte
	switch tok.Kind {
	case jsontext.NullValue, jsontext.BeginArray:
		return k, p.skip(tok), unexpectedType(name, tok.ValueKind())
	case jsontext.BeginObject:
		var isB64, ok bool
		if b64, isB64, ok = w.readB64(p); !ok || !isB64 {
			return k, ok, unexpectedType(name, jsontext.Object)
		}
		want = kindBytes
	case jsontext.StringValue:
		want = kindBytes
	case jsontext.TrueValue, jsontext.FalseValue:
		want = kindInt64
	case jsontext.NumberValue:
		want = kindInt64
		if tok.Num.IsDouble() {
			want = kindFloat
		}
	}
	if k != kindNone && k != want {
		return k, true, apierr.InvalidArgumentf("Unexpected element type in feature: %s expecting type: %s", name, kindNames[k])
	}
	switch tok.Kind {
	case jsontext.BeginObject:
		var ok bool
		if w.b64, ok = tfjson.AppendBase64(w.b64[:0], b64); !ok {
			return k, true, apierr.InvalidArgumentf("Unable to base64 decode")
		}
		w.list = appendBytes(w.list, fieldListValue, w.b64)
	case jsontext.StringValue:
		w.list = appendBytes(w.list, fieldListValue, tok.Str)
	case jsontext.TrueValue:
		w.list = appendVarint(w.list, 1)
	case jsontext.FalseValue:
		w.list = appendVarint(w.list, 0)
	default:
		switch {
		case want == kindFloat:
			w.list = appendFloat(w.list, float32(tok.Num.Float64()))
		case !tok.Num.IsInt64():
			return k, true, apierr.InvalidArgumentf("Feature: %s has uint64_t element. Only int64_t is supported.", name)
		default:
			w.list = appendVarint(w.list, uint64(tok.Num.Int64()))
		}
	}
	return want, true, nil
}

// readB64 reads an object after its '{' and tells whether it is
// json_tensor.cc's IsValBase64Object, exactly one member "b64" whose
// value is a string, and that string.
func (w *writer) readB64(p *parser) (s []byte, isB64, ok bool) {
	key, ok := p.next()
	if !ok || key.Kind == jsontext.EndObject {
		return nil, false, ok
	}
	isKey := string(key.Str) == tfjson.KeyB64
	v, ok := p.next()
	if !ok {
		return nil, false, false
	}
	if !isKey || v.Kind != jsontext.StringValue {
		return nil, false, p.skip(v) && p.skipOut(1)
	}
	s = v.Str
	if !v.InChunk {
		// In the tokenizer's memory, which the next token may reuse.
		w.b64src = append(w.b64src[:0], s...)
		s = w.b64src
	}
	end, ok := p.next()
	if !ok || end.Kind != jsontext.EndObject {
		// A second member: the rest of the object is read.
		return nil, false, ok && p.skipOut(1)
	}
	return s, true, true
}

func unexpectedType(name []byte, k jsontext.Kind) error {
	return apierr.InvalidArgumentf("Feature: %s has element with unexpected JSON type: %s", name, k)
}
