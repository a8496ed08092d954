// Package tfjson holds the rules of TF Serving's json_tensor.cc that its
// request parsers and its response writers share: the request format
// (row or columnar, which decides the response format), ParseJson's texts
// for an empty body and a syntax error, FormatError ("JSON Value: <dump>
// <msg>"), the {"b64": "…"} value and abseil's base64 decoding. The
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

// ParseJSON is json_tensor.cc's ParseJson: the body parsed as rapidjson
// does, with TF Serving's texts for an empty body and for syntax errors.
// The caller releases the document.
func ParseJSON(body []byte, lim tensor.Limits) (*jsontext.Document, error) {
	if len(body) == 0 {
		return nil, ErrEmptyBody()
	}
	doc, err := jsontext.Parse(body, Limits(lim))
	if err != nil {
		return nil, SyntaxError(err)
	}
	return doc, nil
}

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

// FormatError is json_tensor.cc's FormatError: "JSON Value: <dump> <msg>".
func FormatError(v jsontext.Value, msg string) error {
	return FormatDumpError(jsontext.AppendDump(nil, v), msg)
}

// FormatDumpError is FormatError for a value already dumped (a streaming
// parser captures the dump as it reads).
func FormatDumpError(dump []byte, msg string) error {
	var b strings.Builder
	b.WriteString("JSON Value: ")
	b.Write(dump)
	b.WriteByte(' ')
	b.WriteString(msg)
	return apierr.New(apierr.InvalidArgument, b.String())
}

// IsBase64Object is json_tensor.cc's IsValBase64Object: an object with
// exactly one member, "b64", whose value is a string.
func IsBase64Object(v jsontext.Value) bool {
	if v.Kind() != jsontext.Object || v.Len() != 1 {
		return false
	}
	b, ok := v.Member(KeyB64)
	return ok && b.Kind() == jsontext.String
}
