package tfrequest

import (
	"errors"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// TF Serving's request errors (json_tensor.cc), built from their parts so
// that the tests' tape oracle (values at hand) and the decoder (bounded
// dumps captured as it read) say the same.

// The root checks of FillPredictRequestFromJson (FormatError messages).
const (
	msgNotObject      = "Is not object"
	msgSignatureType  = "not formatted correctly. 'signature_name' key must be a string value."
	msgBothKeys       = "Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist "
	msgInstancesType  = "Expecting 'instances' to be an list/array"
	msgInstancesEmpty = "No values in 'instances' array"
)

func errNoInputMap(signatureName string) error {
	if signatureName == "" {
		signatureName = "DEFAULT"
	}
	return apierr.InvalidArgumentf("Failed to get input map for signature: %s", signatureName)
}

func errMissingKey() error { return apierr.InvalidArgumentf("Missing 'inputs' or 'instances' key") }

func errInstancesPlain() error {
	return apierr.InvalidArgumentf("instances is a plain list, but expecting list of objects as multiple input tensors required as per tensorinfo_map")
}

func errInputsPlain() error {
	return apierr.InvalidArgumentf("inputs is a plain value/list, but expecting an object as multiple input tensors required as per tensorinfo_map")
}

func errExpectValue(i int64) error {
	return apierr.InvalidArgumentf("Expecting value/list but got object at item %d of input list", i)
}

func errExpectObject(i int64) error {
	return apierr.InvalidArgumentf("Expecting object but got list at item %d of input list", i)
}

func errNoNamedInput(name []byte) error {
	return apierr.InvalidArgumentf("JSON object: does not have named input: %s", name)
}

func errKeysMissing(i int64, dump []byte, names string) error {
	return apierr.InvalidArgumentf("Failed to process element: %d of 'instances' list. JSON object: %s keys must be equal to: %s", i, dump, names)
}

func errMissingNamedInput(name string) error {
	return apierr.InvalidArgumentf("Missing named input: %s in 'inputs' object.", name)
}

// errItem is AddInstanceItem's comparison of an item with the first one.
func errItem(wantSize, gotSize int64, wantShape, gotShape []int64) error {
	if wantSize != gotSize {
		return apierr.InvalidArgumentf("Expecting tensor size: %d but got: %d", wantSize, gotSize)
	}
	return apierr.InvalidArgumentf("Expecting shape %s but got: %s", tensor.ShapeString(wantShape), tensor.ShapeString(gotShape))
}

func errLevel(dump []byte, level, rank int) error {
	return apierr.InvalidArgumentf("JSON Value: %s found at incorrect level: %d in the JSON DOM. Expected at level: %d", dump, level+1, rank)
}

func errListLevel(level, rank int) error {
	return apierr.InvalidArgumentf("Encountered list at unexpected level: %d expected < %d", level, rank)
}

func errListSize(n int64, level int, want int64) error {
	return apierr.InvalidArgumentf("Encountered list at unexpected size: %d at level: %d expected size: %d", n, level, want)
}

// errType is json_tensor.cc's TypeError.
func errType(dump []byte, k jsontext.Kind, dt tensor.DataType) error {
	return apierr.InvalidArgumentf("JSON Value: %s Type: %s is not of expected type: %s", dump, k, dt.TFShortName())
}

func errUnimplemented(dump []byte, dt tensor.DataType) error {
	return apierr.Errorf(apierr.Unimplemented, "Conversion of JSON Value: %s to type: %s", dump, dt.TFShortName())
}

func errTooManyElements(limit int64) error {
	return apierr.InvalidArgumentf("Request holds more than %d tensor elements, the limit of this server", limit)
}

func errB64Format(dump []byte) error {
	return apierr.InvalidArgumentf("JSON Value: %s not formatted correctly for base64 data", dump)
}

func errB64Decode() error { return apierr.InvalidArgumentf("Unable to base64 decode") }

// ErrUndecided is wrapped by the 400 the decoder answers for the few
// streamed bodies whose TF Serving answer needs the whole text. Where the
// caller holds the text (Parse, and translate's RequestStream up to its
// ReplayBytes) a second look settles them (second.go):
//   - a non-empty "signature_name" after "instances" or "inputs" that
//     resolves to other inputs than the default signature's, which the
//     values were read against: Parse reads the body again;
//   - an instance or "inputs" object whose first key is "b64" when an
//     input is named "b64" too: TF tells them apart by the whole object,
//     as b64Ahead does looking ahead;
//   - named "inputs" that together exceed the element limit (TF counts in
//     signature order): replayInputs reads them again in that order;
//   - a number longer than 4096 bytes (a long fraction or exponent) cut by
//     a chunk boundary, which a whole body has none of.
//
// (A safety net no test reaches says "internal check failed", for a
// broken invariant at the end.)
var ErrUndecided = errors.New("tfrequest: body not decidable in one streaming pass")

// undecided is the 400 for what the stream cannot decide.
func undecided(why string) error {
	return apierr.Wrap(apierr.InvalidArgument, ErrUndecided,
		"Request cannot be checked in one streaming pass: "+why+"; send it as a smaller body")
}
