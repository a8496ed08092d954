package jsontape

import "github.com/tfsbridge/tfsbridge/translate/jsontext"

// AppendDump appends v rendered as TF Serving's JsonValueToString renders
// a value in its error messages (jsontext.DumpStream, fed v's tokens): rapidjson's PrettyWriter (4-space indent)
// with kFormatSingleLineArray, so arrays stay on one line ("[1, 2]") and
// objects are multi-line; integers as integers; doubles in rapidjson's
// Grisu2 shortest form with ".0" ("1.0", "100.0" for 1e2); strings with
// rapidjson's escaping. rapidjson's writer refuses NaN and Infinity: the
// rendering stops right there (after the separator), so [1, NaN] dumps
// as "[1, " and a bare NaN as "".
//
// The length limit works token by token, as TF's limited writer does:
// before each token (opening or closing bracket, key, scalar) the output
// so far must be shorter than DumpLimit, and then the token is written
// whole with its prefix (comma, newline, indent, ": "), however long; once
// the output has reached DumpLimit nothing more is written — no closing
// brackets, no marker. So the dump is a prefix of the full rendering, cut
// at a token boundary; the walk stops there, so dumping a huge document
// costs O(DumpLimit) plus the one token that crossed the mark.
func AppendDump(dst []byte, v Value) []byte {
	var s jsontext.DumpStream
	s.Reset(dst)
	dumpValue(&s, v)
	return s.Bytes()
}

// dumpValue feeds v's tokens to s and reports whether the walk may
// continue (false once the dump stopped).
func dumpValue(s *jsontext.DumpStream, v Value) bool {
	switch k := v.Kind(); k {
	case jsontext.Null:
		return s.Feed(jsontext.Token{Kind: jsontext.NullValue})
	case jsontext.False:
		return s.Feed(jsontext.Token{Kind: jsontext.FalseValue})
	case jsontext.True:
		return s.Feed(jsontext.Token{Kind: jsontext.TrueValue})
	case jsontext.String:
		return s.Feed(jsontext.Token{Kind: jsontext.StringValue, Str: v.Str()})
	case jsontext.Number:
		return s.Feed(jsontext.Token{Kind: jsontext.NumberValue, Num: v.Num()})
	}
	obj := v.Kind() == jsontext.Object
	open, end := jsontext.BeginArray, jsontext.EndArray
	if obj {
		open, end = jsontext.BeginObject, jsontext.EndObject
	}
	if !s.Feed(jsontext.Token{Kind: open}) {
		return false
	}
	e, _ := v.First()
	for i, c := 0, v.Len(); i < c; i++ {
		if obj {
			if !s.Feed(jsontext.Token{Kind: jsontext.Key, Str: e.Str()}) {
				return false
			}
			e = e.Next()
		}
		if !dumpValue(s, e) {
			return false
		}
		e = e.Next()
	}
	return s.Feed(jsontext.Token{Kind: end})
}
