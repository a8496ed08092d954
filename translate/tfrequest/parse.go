package tfrequest

import (
	"bytes"
	"slices"
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// The decoder's two ends: Parse, a whole body as one chunk, and Close,
// which judges what Write recorded (decoder_record.go) in TF's order.

// Parse parses a predict request body as TF Serving's
// FillPredictRequestFromJson does, check for check and in its order
// (docs/tfserving-rest.md §2.3, §3, §4): JSON syntax, an object root, a
// string signature_name; resolve (its error returned as is); an input map,
// exactly one of "instances" / "inputs", the values against the inputs'
// names and dtypes; last the predictor's input-count check
// (VerifyRequestInputsSize), so a Request holds one tensor per input.
// Every failure is an *apierr.Error with TF's message. lim bounds nesting
// and tensor elements. Strings in the Request may alias body.
func Parse(body []byte, resolve Resolver, lim tensor.Limits) (*Request, error) {
	d := NewDecoder(resolve, lim)
	for {
		d.whole, d.body = true, body
		// A comma follows every number but a list's last: the count
		// sizes a single input's buffer in one go (vectorized).
		d.hint = int64(bytes.Count(body, []byte{','})) + 1
		d.Write(body)
		r, err := d.Close()
		if !d.lost {
			return r, err
		}
		// The signature named after the values, which were read against
		// the default one: read again with that name known (once).
		name := d.req.SignatureName
		d = NewDecoder(resolve, lim)
		d.req.SignatureName, d.known = name, true
	}
}

// Close finishes the body and returns the Request, or TF Serving's error.
func (d *Decoder) Close() (*Request, error) {
	if err := d.end(); err != nil {
		d.Abort()
		return nil, err
	}
	return d.req, nil
}

// end judges what Write recorded, in TF's order, and builds the tensors.
func (d *Decoder) end() error {
	if d.off == 0 {
		return tfjson.ErrEmptyBody()
	}
	for tok, ok := d.tz.End(); ok && !d.failed; tok, ok = d.tz.End() {
		d.token(tok, -1, 0) // a number or literal the body ends in
	}
	if !d.failed {
		d.tokErr()
	}
	if d.failed {
		return d.final
	}
	if err := d.rootErr(); err != nil {
		return err
	}
	if d.ferr != nil {
		return d.ferr
	}
	if !d.finish() {
		return undecided("internal check failed")
	}
	return verifyInputsSize(d.req.Signature, d.req.Inputs)
}

// rootErr judges the root facts in TF's order.
func (d *Decoder) rootErr() error {
	root := func(msg string) error { return tfjson.FormatDumpError(d.dumps[dumpRoot].s.Bytes(), msg) }
	if d.rootKind != jsontext.Object {
		return root(msgNotObject)
	}
	if d.sigKind != jsontext.String {
		return root(msgSignatureType)
	}
	resolved := d.req.Signature != nil || d.resolveE != nil
	switch {
	case !resolved || d.lateSig:
		// No "instances" nor "inputs" (TF resolves first), or a name
		// after them: resolved now.
		sig, err := d.resolveName(d.req.SignatureName)
		switch {
		case err != nil:
			return err
		case !resolved:
		case d.req.Signature == nil || !sameInputs(sig, d.req.Signature):
			// Read against other inputs; the root checks left do not care.
			d.lost = true
		default:
			d.req.Signature = sig
		}
	case d.req.Signature == nil:
		return d.resolveE
	}
	switch {
	case d.both:
		return root(msgBothKeys)
	case d.instBad:
		return root(msgInstancesType)
	case d.instEmpty:
		return root(msgInstancesEmpty)
	case d.req.Format == 0:
		return errMissingKey()
	case d.lost:
		return undecided(`"signature_name" after the inputs names another signature`)
	}
	return nil
}

// sameInputs reports two signatures whose inputs read a body alike.
func sameInputs(a, b *tensor.Signature) bool {
	return slices.EqualFunc(a.Inputs, b.Inputs, func(x, y tensor.Spec) bool {
		return x.Name == y.Name && x.DataType == y.DataType
	})
}

// verifyInputsSize is predict_util.cc's VerifyRequestInputsSize, run
// before the model: as many distinct inputs as the signature
// (docs/tfserving-rest.md §4.1). Only row instances that are b64 objects
// get here with fewer (they all feed the first input). The text names both
// sets in std::set<string> order, then the differences both ways: "input
// size does not match signature: 1!=2 len({a}) != len({a,b}). Sent extra:
// {}. Missing but required: {b}."
func verifyInputsSize(sig *tensor.Signature, inputs []tensor.Tensor) error {
	if len(inputs) == len(sig.Inputs) {
		return nil // every parser path fills each input once, or fails
	}
	sent := tensor.NameSet(len(inputs), func(i int) string { return inputs[i].Name })
	want := tensor.NameSet(len(sig.Inputs), func(i int) string { return sig.Inputs[i].Name })
	if len(sent) == len(want) {
		return nil // TF compares map sizes: duplicate names count once
	}
	return apierr.InvalidArgumentf("input size does not match signature: %d!=%d len({%s}) != len({%s}). Sent extra: {%s}. Missing but required: {%s}.",
		len(sent), len(want), strings.Join(sent, ","), strings.Join(want, ","),
		strings.Join(tensor.SetDifference(sent, want), ","), strings.Join(tensor.SetDifference(want, sent), ","))
}
