package oracle

import (
	"github.com/tfsbridge/tfsbridge/translate/internal/jsontape"
	"github.com/tfsbridge/tfsbridge/translate/jsontext"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfjson"
)

// The tape oracles' readings of json_tensor.cc, over jsontape: production
// reads the body in one pass and captures the dumps as it goes.

// ParseJSON is json_tensor.cc's ParseJson over the tape: the body parsed
// as rapidjson does, with TF Serving's texts for an empty body and for
// syntax errors. The caller releases the document.
func ParseJSON(body []byte, lim tensor.Limits) (*jsontape.Document, error) {
	if len(body) == 0 {
		return nil, tfjson.ErrEmptyBody()
	}
	doc, err := jsontape.Parse(body, tfjson.Limits(lim))
	if err != nil {
		return nil, tfjson.SyntaxError(err)
	}
	return doc, nil
}

// FormatError is json_tensor.cc's FormatError: "JSON Value: <dump> <msg>".
func FormatError(v jsontape.Value, msg string) error {
	return tfjson.FormatDumpError(jsontape.AppendDump(nil, v), msg)
}

// IsBase64Object is json_tensor.cc's IsValBase64Object: an object with
// exactly one member, "b64", whose value is a string.
func IsBase64Object(v jsontape.Value) bool {
	if v.Kind() != jsontext.Object || v.Len() != 1 {
		return false
	}
	b, ok := v.Member(tfjson.KeyB64)
	return ok && b.Kind() == jsontext.String
}
