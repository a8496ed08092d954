package tfexample

// The tape-based parser that parse.go replaced, kept as the oracle of
// FuzzParseOracle: the one-pass parser must answer every body alike.

import (
	"bytes"
	"slices"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/internal/jsontape"
	"github.com/tfsbridge/tfsbridge/translate/internal/oracle"

	"github.com/tfsbridge/tfsbridge/test/conformance"
	"github.com/tfsbridge/tfsbridge/translate/tensor"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// oracleParse parses a classify or regress request body check for check as TF
// Serving does: JSON syntax, top level is an object, signature_name is a
// string, then the context (when present), then "examples" must be a
// non-empty array of objects whose features are a scalar or a flat list of
// strings, b64 objects, integers, booleans or decimals (NaN and ±Infinity
// included), one kind per feature.
//
// Every failure is an *apierr.Error carrying TF Serving's message (400),
// or the limit of opt (400 for elements, 413 for bytes).
func oracleParse(body []byte, opt Options) (*Request, error) {
	opt.Limits = opt.Limits.OrDefault()
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = DefaultMaxBytes
	}
	doc, err := oracle.ParseJSON(body, opt.Limits)
	if err != nil {
		return nil, err
	}
	defer doc.Release()
	root := doc.Root()
	if root.Kind() != jsontext.Object {
		return nil, oracle.FormatError(root, "Is not object")
	}
	r := &Request{}
	if v, ok := root.Member(keySignature); ok {
		if v.Kind() != jsontext.String {
			return nil, oracle.FormatError(root, "not formatted correctly. 'signature_name' key must be a string value.")
		}
		r.SignatureName = string(v.Str())
	}
	w := &oracleWriter{opt: opt}
	var context []byte
	contextValues := int64(0)
	if v, ok := root.Member(keyContext); ok {
		if err := w.example(v); err != nil {
			return nil, err
		}
		context, contextValues = slices.Clone(w.out), w.values
		w.out, w.values, w.size = w.out[:0], 0, 0 // charged per example below
	}
	examples, ok := root.Member(keyExamples)
	switch {
	case !ok:
		return nil, oracle.FormatError(root, "When method is classify, key 'examples' is expected and was not found")
	case examples.Kind() != jsontext.Array:
		return nil, oracle.FormatError(root, "Expecting 'examples' value to be an list/array")
	case examples.Len() == 0:
		return nil, oracle.FormatError(root, "'examples' value is an empty array")
	}
	n := int64(examples.Len())
	// The context is repeated in every example: charge it up front, so
	// that a large context times many examples is refused unbuilt.
	if err := w.charge(n*(1+contextValues), n*int64(len(context))); err != nil {
		return nil, err
	}
	// The examples take about as many bytes as their JSON text: one
	// allocation up front instead of a doubling series.
	w.out = slices.Grow(w.out[:0], int(min(int64(len(body))+n*int64(len(context)), w.opt.MaxBytes)))
	ends := make([]int, 0, n)
	for _, e := range examples.Elems() {
		w.out = append(w.out, context...)
		if err := w.example(e); err != nil {
			return nil, err
		}
		ends = append(ends, len(w.out))
	}
	r.Examples = make([][]byte, len(ends))
	start := 0
	for i, end := range ends {
		r.Examples[i] = w.out[start:end:end]
		start = end
	}
	return r, nil
}

// oracleWriter serializes examples into out, with scratch space for the
// features of the example being written.
type oracleWriter struct {
	opt    Options
	out    []byte
	values int64 // feature values written so far
	size   int64 // bytes charged so far

	feats   []byte        // the encoded Feature messages of the current example
	names   []byte        // the names of its features
	entries []oracleEntry // where each of them is, by name
	list    []byte        // the payload of the current feature's list
	b64     []byte        // a decoded b64 value
	sorted  []oracleEntry // entries after sorting and dropping duplicates
}

// oracleEntry is one feature of the current example: its name in oracleWriter.names
// and its Feature message in oracleWriter.feats. No pointers, so sorting entries
// costs no write barriers.
type oracleEntry struct {
	nameStart, nameEnd int32
	start, end         int32
}

// charge counts elements and bytes against the limits.
func (w *oracleWriter) charge(elements, size int64) error {
	w.values += elements
	w.size += size
	if w.values > w.opt.Limits.MaxElements {
		return apierr.InvalidArgumentf("Request holds more than %d tensor elements, the limit of this server", w.opt.Limits.MaxElements)
	}
	if w.size > w.opt.MaxBytes {
		return apierr.Errorf(apierr.PayloadTooLarge, "Request examples serialize to more than %d bytes, the limit of this server", w.opt.MaxBytes)
	}
	return nil
}

// example is MakeExampleFromJsonObject: it appends v's tf.Example to out.
// Features are written in name order and a repeated name keeps its last
// value (the proto map assignment TF Serving makes); an empty object is
// an Example without features, which serializes to nothing.
func (w *oracleWriter) example(v jsontape.Value) error {
	if v.Kind() != jsontext.Object {
		return apierr.InvalidArgumentf("Example must be JSON object but got JSON %s", v.Kind())
	}
	if v.Len() == 0 {
		return nil
	}
	w.feats, w.names, w.entries = w.feats[:0], w.names[:0], w.entries[:0]
	for key, content := range v.Members() {
		// rapidjson's GetString() becomes a std::string from a C string:
		// the name ends at its first NUL.
		name := key.Str()
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		start := len(w.feats)
		if err := w.feature(name, content); err != nil {
			return err
		}
		w.names = append(w.names, name...)
		w.entries = append(w.entries, oracleEntry{int32(len(w.names) - len(name)), int32(len(w.names)), int32(start), int32(len(w.feats))})
	}
	// Stable sort (most requests are already in order), then keep the
	// last of each run of equal names.
	byName := func(a, b oracleEntry) int { return bytes.Compare(w.name(a), w.name(b)) }
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
	exampleLen := sizeField(featuresLen)
	if err := w.charge(0, int64(exampleLen)); err != nil {
		return err
	}
	// Example.features (1) → Features.feature (1): map<string, Feature>,
	// each oracleEntry a message {key (1), value (2)}.
	w.out = appendLen(w.out, fieldExampleFeatures, featuresLen)
	for _, e := range w.sorted {
		w.out = appendLen(w.out, fieldFeaturesFeature, w.mapEntryLen(e))
		w.out = appendBytes(w.out, fieldMapKey, w.name(e))
		w.out = appendBytes(w.out, fieldMapValue, w.feats[e.start:e.end])
	}
	return nil
}

func (w *oracleWriter) name(e oracleEntry) []byte { return w.names[e.nameStart:e.nameEnd] }

func (w *oracleWriter) mapEntryLen(e oracleEntry) int {
	return sizeField(int(e.nameEnd-e.nameStart)) + sizeField(int(e.end-e.start))
}

// feature appends to w.feats the Feature message of one JSON feature
// value: a scalar is a one-element list, [] a Feature with no kind.
func (w *oracleWriter) feature(name []byte, content jsontape.Value) error {
	w.list = w.list[:0]
	k, count := kindNone, int64(0)
	add := func(v jsontape.Value) error {
		var err error
		k, err = w.value(name, k, v)
		count++
		return err
	}
	if content.Kind() == jsontext.Array {
		for _, v := range content.Elems() {
			if err := add(v); err != nil {
				return err
			}
		}
	} else if err := add(content); err != nil {
		return err
	}
	// Only the values: the bytes are charged once the example is whole
	// (its scratch space is within a small factor of its JSON text).
	if err := w.charge(count, 0); err != nil {
		return err
	}
	if k == kindNone {
		return nil // Feature{}: an empty message
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
	return nil
}

// value is AddValueToFeature: it checks one element against the kind the
// feature has so far (kindNone before its first value) and appends it to
// w.list, returning the feature's kind.
func (w *oracleWriter) value(name []byte, k kind, v jsontape.Value) (kind, error) {
	var want kind
	switch v.Kind() {
	case jsontext.Null, jsontext.Array:
		return k, oracleUnexpectedType(name, v)
	case jsontext.Object:
		if !oracle.IsBase64Object(v) {
			return k, oracleUnexpectedType(name, v)
		}
		want = kindBytes
	case jsontext.String:
		want = kindBytes
	case jsontext.True, jsontext.False:
		want = kindInt64
	case jsontext.Number:
		want = kindInt64
		if v.Num().IsDouble() {
			want = kindFloat
		}
	}
	if k != kindNone && k != want {
		return k, apierr.InvalidArgumentf("Unexpected element type in feature: %s expecting type: %s", name, kindNames[k])
	}
	switch v.Kind() {
	case jsontext.Object:
		s, _ := v.Member("b64")
		var ok bool
		if w.b64, ok = tfjson.AppendBase64(w.b64[:0], s.Str()); !ok {
			return k, apierr.InvalidArgumentf("Unable to base64 decode")
		}
		w.list = appendBytes(w.list, fieldListValue, w.b64)
	case jsontext.String:
		w.list = appendBytes(w.list, fieldListValue, v.Str())
	case jsontext.True:
		w.list = appendVarint(w.list, 1)
	case jsontext.False:
		w.list = appendVarint(w.list, 0)
	default:
		switch {
		case want == kindFloat:
			w.list = appendFloat(w.list, float32(v.Num().Float64()))
		case !v.Num().IsInt64():
			return k, apierr.InvalidArgumentf("Feature: %s has uint64_t element. Only int64_t is supported.", name)
		default:
			w.list = appendVarint(w.list, uint64(v.Num().Int64()))
		}
	}
	return want, nil
}

func oracleUnexpectedType(name []byte, v jsontape.Value) error {
	return apierr.InvalidArgumentf("Feature: %s has element with unexpected JSON type: %s", name, v.Kind())
}

// FuzzParseOracle: the one-pass parser answers every body as the tape
// parser it replaced does: the same examples, byte for byte, or the same
// error and status, under limits small enough to be met.
func FuzzParseOracle(f *testing.F) {
	for _, body := range conformance.RequestBodies(f, "tfserving_cases.json") {
		f.Add(body, int64(1<<10), int64(1<<16))
	}
	for _, s := range []string{
		`{"examples": [{"s": "a", "b": {"b64": "aGk="}, "i": [7, -1, true], "x": [1.5, NaN], "e": []}]}`,
		`{"signature_name": "s", "context": {"c": 1, "d": "x"}, "examples": [{"c": 2.0}, {}, {"c\u0000": "y", "c": 3}]}`,
		`{"examples": [{"a": [1, 2, 3]}, {"b": "x"}], "context": {"c": [1, 2]}}`,
		`{"examples": [{"x": [18446744073709551616, 9223372036854775808]}]}`,
		`{"examples": [{"n": null}], "context": []}`,
		`{"examples": [{"b": {"b64": "a\u0041=="}}, {"b": {"b64": "x", "y": 1}}, {"b": {"c": 1}}]}`,
		`{"examples": [{"a": 1}, 5], "signature_name": 3, "examples": []}`,
		`[{"examples": []}]`,
	} {
		f.Add([]byte(s), int64(6), int64(64))
	}
	f.Fuzz(func(t *testing.T, body []byte, maxElements, maxBytes int64) {
		opt := Options{Limits: tensor.Limits{MaxDepth: 16, MaxElements: max(maxElements%4096, 1)}, MaxBytes: max(maxBytes%(1<<16), 1)}
		got, err := Parse(body, opt)
		want, werr := oracleParse(body, opt)
		if (err == nil) != (werr == nil) || err != nil && (err.Error() != werr.Error() || apierr.As(err).HTTPStatus() != apierr.As(werr).HTTPStatus()) {
			t.Fatalf("error %v, want %v", err, werr)
		}
		if err != nil {
			return
		}
		if got.SignatureName != want.SignatureName || !slices.EqualFunc(got.Examples, want.Examples, bytes.Equal) {
			t.Fatalf("got %q %x, want %q %x", got.SignatureName, got.Examples, want.SignatureName, want.Examples)
		}
	})
}
