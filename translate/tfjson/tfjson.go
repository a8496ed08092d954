// Package tfjson holds the rules of TF Serving's json_tensor.cc that its
// request parsers and its response writers share: the request format
// (row or columnar, which decides the response format), ParseJson's texts
// for an empty body and a syntax error, FormatError ("JSON Value: <dump>
// <msg>"), the {"b64": "…"} key and abseil's base64 decoding. The
// predict parser (tfrequest), the classify/regress parser (tfexample) and
// the writers (tfresponse) import it, never one another.
package tfjson

import (
	"strings"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// KeyB64 is the one key of a base64 value: {"b64": "<string>"}.
const KeyB64 = "b64"

// Limits are the JSON reader's bounds for a body within lim.
func Limits(lim tensor.Limits) jsontext.Limits {
	lim = lim.OrDefault()
	return jsontext.ForElements(lim.MaxDepth, lim.MaxElements)
}

// SyntaxError is ParseJson's text for a document rapidjson rejects.
func SyntaxError(e error) error {
	return apierr.Wrap(apierr.InvalidArgument, e, "JSON Parse error: "+e.Error())
}

// ErrEmptyBody is ParseJson's text for an empty body.
func ErrEmptyBody() error {
	return apierr.InvalidArgumentf("JSON Parse error: The document is empty")
}

// FormatDumpError is json_tensor.cc's FormatError: "JSON Value: <dump>
// <msg>", the value's dump (jsontext.DumpStream) captured as it was read.
func FormatDumpError(dump []byte, msg string) error {
	var b strings.Builder
	b.WriteString("JSON Value: ")
	b.Write(dump)
	b.WriteByte(' ')
	b.WriteString(msg)
	return apierr.New(apierr.InvalidArgument, b.String())
}
