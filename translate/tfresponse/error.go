package tfresponse

import "github.com/tfsbridge/tfsbridge/translate/jsontext"

// Error appends TF Serving's error body for msg: {"error": msg} as
// rapidjson's pretty writer prints it (MakeJsonFromStatus, docs/tfserving-rest.md §1.6):
// "{\n    \"error\": \"<escaped msg>\"\n}", no trailing newline. msg is
// the status message without its code prefix (apierr.Error.Msg).
func Error(dst []byte, msg string) []byte {
	dst = append(dst, "{\n    \"error\": "...)
	dst = jsontext.AppendString(dst, msg)
	return append(dst, "\n}"...)
}
