package tfrequest

import (
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// The helpers below are the parts of json_tensor.cc that TF Serving's
// classify and regress parser (package tfexample) shares with predict:
// one JSON entry point, one FormatError, one b64 object rule.

// ParseJSON is json_tensor.cc's ParseJson: the body parsed as rapidjson
// does, with TF Serving's texts for an empty body and for syntax errors.
// The caller releases the document.
func ParseJSON(body []byte, lim tensor.Limits) (*jsontext.Document, error) {
	if len(body) == 0 {
		return nil, errEmptyBody()
	}
	doc, err := jsontext.Parse(body, jsonLimits(lim))
	if err != nil {
		return nil, syntaxError(err)
	}
	return doc, nil
}

// jsonLimits are the JSON reader's bounds for a body within lim.
func jsonLimits(lim tensor.Limits) jsontext.Limits {
	lim = lim.OrDefault()
	return jsontext.ForElements(lim.MaxDepth, lim.MaxElements)
}

// FormatError is json_tensor.cc's FormatError: "JSON Value: <dump> <msg>".
func FormatError(v jsontext.Value, msg string) error { return formatError(v, msg) }

// IsBase64Object reports a {"b64": "<string>"} object (IsValBase64Object).
func IsBase64Object(v jsontext.Value) bool { return isB64Object(v) }

// AppendBase64 decodes s as abseil's Base64Unescape does, appending to
// dst; ok is false where TF Serving says "Unable to base64 decode".
func AppendBase64(dst, s []byte) (out []byte, ok bool) { return base64Unescape(dst, s) }
