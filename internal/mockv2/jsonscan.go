package mockv2

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// This file is a small validating JSON scanner plus lazy views over the
// validated text. It is hand-written rather than built on encoding/json
// because the servers imitated here accept what encoding/json rejects:
// Triton (rapidjson with kParseNanAndInfFlag) and the Python servers
// (json.loads) take bare NaN/Infinity tokens, and each reports malformed
// JSON with its own text (rapidjson's GetParseError_En, Python's
// JSONDecodeError). The views never copy the document: a tensor's "data"
// array is walked in place, so a request costs no more memory than the
// tensors it declares.

// dialect selects the JSON grammar extensions and error texts of one server.
type dialect uint8

const (
	// dialectRapid is rapidjson with kParseNanAndInfFlag (Triton): NaN,
	// Inf and Infinity, each optionally negative.
	dialectRapid dialect = iota
	// dialectPython is Python's json module (KServe and MLServer JSON
	// bodies): NaN, Infinity and -Infinity.
	dialectPython
	// dialectStrict is RFC 8259 only (orjson, KServe's binary path).
	dialectStrict
)

// maxScanDepth bounds recursion in the scanner. Triton's own data limit
// (100) is applied later with Triton's text; this only keeps a hostile
// body from exhausting the stack.
const maxScanDepth = 1000

// scanErrKind is what went wrong while scanning.
type scanErrKind uint8

const (
	scanEmpty scanErrKind = iota + 1
	scanRootNotSingular
	scanValueInvalid
	scanMissName
	scanMissColon
	scanMissCommaOrBrace
	scanMissCommaOrBracket
	scanBadEscape
	scanBadUnicodeHex
	scanBadSurrogate
	scanMissQuote
	scanControlChar
	scanMissFraction
	scanMissExponent
	scanNumberTooBig
	scanTooDeep
)

// scanError is a syntax error at byte offset Off.
type scanError struct {
	Kind scanErrKind
	Off  int
}

func (e *scanError) Error() string { return e.rapidMessage() }

// rapidMessage is rapidjson's GetParseError_En text for the error.
func (e *scanError) rapidMessage() string {
	switch e.Kind {
	case scanEmpty:
		return "The document is empty."
	case scanRootNotSingular:
		return "The document root must not be followed by other values."
	case scanMissName:
		return "Missing a name for object member."
	case scanMissColon:
		return "Missing a colon after a name of object member."
	case scanMissCommaOrBrace:
		return "Missing a comma or '}' after an object member."
	case scanMissCommaOrBracket:
		return "Missing a comma or ']' after an array element."
	case scanBadEscape:
		return "Invalid escape character in string."
	case scanBadUnicodeHex:
		return "Incorrect hex digit after \\u escape in string."
	case scanBadSurrogate:
		return "The surrogate pair in string is invalid."
	case scanMissQuote:
		return "Missing a closing quotation mark in string."
	case scanControlChar:
		return "Invalid encoding in string."
	case scanMissFraction:
		return "Miss fraction part in number."
	case scanMissExponent:
		return "Miss exponent in number."
	case scanNumberTooBig:
		return "Number too big to be stored in double."
	case scanTooDeep:
		return "Terminate parsing due to Handler error."
	}
	return "Invalid value."
}

// pythonMessage is the msg of Python's json.JSONDecodeError for the error.
func (e *scanError) pythonMessage() string {
	switch e.Kind {
	case scanRootNotSingular:
		return "Extra data"
	case scanMissName:
		return "Expecting property name enclosed in double quotes"
	case scanMissColon:
		return "Expecting ':' delimiter"
	case scanMissCommaOrBrace, scanMissCommaOrBracket:
		return "Expecting ',' delimiter"
	case scanBadEscape:
		return "Invalid \\escape"
	case scanBadUnicodeHex, scanBadSurrogate:
		return "Invalid \\uXXXX escape"
	case scanMissQuote:
		return "Unterminated string starting at"
	case scanControlChar:
		return "Invalid control character at"
	case scanTooDeep:
		return "maximum recursion depth exceeded"
	}
	return "Expecting value"
}

// orjsonMessage approximates orjson's JSONDecodeError text (KServe's binary
// path reports it after "Unrecognized request format: ").
func (e *scanError) orjsonMessage() string {
	what := "unexpected character"
	switch e.Kind {
	case scanEmpty:
		what = "Input is a zero-length, empty document"
	case scanRootNotSingular:
		what = "trailing characters"
	case scanMissQuote:
		what = "unexpected end of data"
	case scanTooDeep:
		what = "recursion limit exceeded"
	}
	return what + ": line 1 column " + strconv.Itoa(e.Off+1) + " (char " + strconv.Itoa(e.Off) + ")"
}

// scanner validates one document in one dialect.
type scanner struct {
	b []byte
	d dialect
}

// scanDocument validates b as one JSON document and returns the root value
// with surrounding whitespace trimmed.
func scanDocument(b []byte, d dialect) (jval, *scanError) {
	s := scanner{b: b, d: d}
	i := s.ws(0)
	if i == len(b) {
		return nil, &scanError{Kind: scanEmpty, Off: i}
	}
	end, err := s.value(i, 0)
	if err != nil {
		return nil, err
	}
	if j := s.ws(end); j != len(b) {
		return nil, &scanError{Kind: scanRootNotSingular, Off: j}
	}
	return jval(b[i:end]), nil
}

func (s *scanner) ws(i int) int {
	for i < len(s.b) {
		switch s.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// lit consumes the literal word at i, returning its end or -1.
func (s *scanner) lit(i int, word string) int {
	if len(s.b)-i >= len(word) && string(s.b[i:i+len(word)]) == word {
		return i + len(word)
	}
	return -1
}

func (s *scanner) value(i, depth int) (int, *scanError) {
	if i >= len(s.b) {
		return i, &scanError{Kind: scanValueInvalid, Off: i}
	}
	switch c := s.b[i]; {
	case c == '{':
		return s.object(i, depth+1)
	case c == '[':
		return s.array(i, depth+1)
	case c == '"':
		return s.str(i)
	case c == 't':
		return s.word(i, "true")
	case c == 'f':
		return s.word(i, "false")
	case c == 'n':
		return s.word(i, "null")
	case c == '-' || (c >= '0' && c <= '9') || c == 'N' || c == 'I':
		return s.number(i)
	}
	return i, &scanError{Kind: scanValueInvalid, Off: i}
}

func (s *scanner) word(i int, w string) (int, *scanError) {
	if end := s.lit(i, w); end >= 0 {
		return end, nil
	}
	off := i
	if s.d == dialectRapid {
		// rapidjson consumes the matching letters and fails after them.
		for off-i < len(w) && off < len(s.b) && s.b[off] == w[off-i] {
			off++
		}
	}
	return i, &scanError{Kind: scanValueInvalid, Off: off}
}

func (s *scanner) object(i, depth int) (int, *scanError) {
	if depth > maxScanDepth {
		return i, &scanError{Kind: scanTooDeep, Off: i}
	}
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(s.b) || s.b[i] != '"' {
			return i, &scanError{Kind: scanMissName, Off: i}
		}
		end, err := s.str(i)
		if err != nil {
			return end, err
		}
		i = s.ws(end)
		if i >= len(s.b) || s.b[i] != ':' {
			return i, &scanError{Kind: scanMissColon, Off: i}
		}
		if end, err = s.value(s.ws(i+1), depth); err != nil {
			return end, err
		}
		i = s.ws(end)
		if i < len(s.b) && s.b[i] == ',' {
			i = s.ws(i + 1)
			continue
		}
		if i < len(s.b) && s.b[i] == '}' {
			return i + 1, nil
		}
		return i, &scanError{Kind: scanMissCommaOrBrace, Off: i}
	}
}

func (s *scanner) array(i, depth int) (int, *scanError) {
	if depth > maxScanDepth {
		return i, &scanError{Kind: scanTooDeep, Off: i}
	}
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == ']' {
		return i + 1, nil
	}
	for {
		end, err := s.value(i, depth)
		if err != nil {
			return end, err
		}
		i = s.ws(end)
		if i < len(s.b) && s.b[i] == ',' {
			i = s.ws(i + 1)
			continue
		}
		if i < len(s.b) && s.b[i] == ']' {
			return i + 1, nil
		}
		return i, &scanError{Kind: scanMissCommaOrBracket, Off: i}
	}
}

func (s *scanner) str(start int) (int, *scanError) {
	// An unterminated string is reported where rapidjson stopped reading,
	// and where it starts by Python.
	missQuote := func(at int) *scanError {
		if s.d == dialectPython {
			return &scanError{Kind: scanMissQuote, Off: start}
		}
		return &scanError{Kind: scanMissQuote, Off: at}
	}
	i := start + 1
	for i < len(s.b) {
		c := s.b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(s.b) {
				return i, missQuote(len(s.b))
			}
			switch s.b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r, ok := hex4(s.b, i+2)
				if !ok {
					return i, &scanError{Kind: scanBadUnicodeHex, Off: i}
				}
				esc := i
				i += 6
				if s.d != dialectPython && r >= 0xD800 && r <= 0xDFFF {
					// rapidjson and orjson want a well-formed surrogate pair.
					lo, ok := rune(0), false
					if r <= 0xDBFF && i+1 < len(s.b) && s.b[i] == '\\' && s.b[i+1] == 'u' {
						lo, ok = hex4(s.b, i+2)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return i, &scanError{Kind: scanBadSurrogate, Off: esc}
					}
					i += 6
				}
			default:
				return i, &scanError{Kind: scanBadEscape, Off: i}
			}
		case c < 0x20:
			if c == 0 && s.d == dialectRapid {
				return i, missQuote(i)
			}
			return i, &scanError{Kind: scanControlChar, Off: i}
		default:
			i++
		}
	}
	return i, missQuote(len(s.b))
}

// hex4 reads four hex digits at i.
func hex4(b []byte, i int) (rune, bool) {
	if len(b)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (s *scanner) number(start int) (int, *scanError) {
	i := start
	if s.b[i] == '-' {
		i++
	}
	if end, ok := s.nonFinite(i, i > start); ok {
		return end, nil
	}
	switch {
	case i < len(s.b) && s.b[i] == '0':
		i++
	case i < len(s.b) && s.b[i] >= '1' && s.b[i] <= '9':
		for i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9' {
			i++
		}
	default:
		return start, &scanError{Kind: scanValueInvalid, Off: start}
	}
	big := i-start > 300
	if i < len(s.b) && s.b[i] == '.' {
		i++
		if i >= len(s.b) || s.b[i] < '0' || s.b[i] > '9' {
			return i, &scanError{Kind: scanMissFraction, Off: i}
		}
		for i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9' {
			i++
		}
	}
	if i < len(s.b) && (s.b[i] == 'e' || s.b[i] == 'E') {
		big = true
		i++
		if i < len(s.b) && (s.b[i] == '+' || s.b[i] == '-') {
			i++
		}
		if i >= len(s.b) || s.b[i] < '0' || s.b[i] > '9' {
			return i, &scanError{Kind: scanMissExponent, Off: i}
		}
		for i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9' {
			i++
		}
	}
	if big && s.d == dialectRapid {
		// rapidjson refuses literals that overflow a double; Python and
		// orjson turn them into inf.
		if f, _ := strconv.ParseFloat(string(s.b[start:i]), 64); math.IsInf(f, 0) {
			return start, &scanError{Kind: scanNumberTooBig, Off: start}
		}
	}
	return i, nil
}

// nonFinite consumes a NaN/Infinity token at i when the dialect has them.
func (s *scanner) nonFinite(i int, negative bool) (int, bool) {
	switch s.d {
	case dialectRapid:
		if end := s.lit(i, "NaN"); end >= 0 {
			return end, true
		}
		if end := s.lit(i, "Infinity"); end >= 0 {
			return end, true
		}
		if end := s.lit(i, "Inf"); end >= 0 {
			return end, true
		}
	case dialectPython:
		if end := s.lit(i, "Infinity"); end >= 0 {
			return end, true
		}
		if !negative {
			if end := s.lit(i, "NaN"); end >= 0 {
				return end, true
			}
		}
	}
	return 0, false
}

// jval is one validated JSON value, without surrounding whitespace. Its
// methods assume validity and never index outside the slice.
type jval []byte

// jkind is the JSON type of a value.
type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

func (v jval) kind() jkind {
	if len(v) == 0 {
		return jNull
	}
	switch v[0] {
	case '{':
		return jObject
	case '[':
		return jArray
	case '"':
		return jString
	case 't', 'f':
		return jBool
	case 'n':
		return jNull
	}
	return jNumber
}

// isTrue reports whether v is the literal true.
func (v jval) isTrue() bool { return len(v) > 0 && v[0] == 't' }

// pythonType is Python's name for the value's type, for error texts.
func (v jval) pythonType() string {
	switch v.kind() {
	case jObject:
		return "dict"
	case jArray:
		return "list"
	case jString:
		return "str"
	case jBool:
		return "bool"
	case jNull:
		return "NoneType"
	}
	if v.number().isInt {
		return "int"
	}
	return "float"
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the valid value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', ']', '}', ' ', '\t', '\n', '\r', ':':
			return j
		}
		j++
	}
	return j
}

func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// elems calls fn for each element of an array, stopping when fn returns
// false. It does nothing for non-arrays.
func (v jval) elems(fn func(i int, e jval) bool) {
	if v.kind() != jArray {
		return
	}
	i := skipWS(v, 1)
	for n := 0; i < len(v) && v[i] != ']'; n++ {
		end := skipValue(v, i)
		if !fn(n, v[i:end]) {
			return
		}
		i = skipWS(v, end)
		if i < len(v) && v[i] == ',' {
			i = skipWS(v, i+1)
		}
	}
}

// arrayLen is the number of elements of an array (0 for non-arrays).
func (v jval) arrayLen() int {
	n := 0
	v.elems(func(int, jval) bool { n++; return true })
	return n
}

// members calls fn for each member of an object in document order.
func (v jval) members(fn func(key jval, val jval) bool) {
	if v.kind() != jObject {
		return
	}
	i := skipWS(v, 1)
	for i < len(v) && v[i] == '"' {
		kend := skipString(v, i)
		key := v[i:kend]
		i = skipWS(v, kend)
		i = skipWS(v, i+1) // ':'
		end := skipValue(v, i)
		if !fn(key, v[i:end]) {
			return
		}
		i = skipWS(v, end)
		if i < len(v) && v[i] == ',' {
			i = skipWS(v, i+1)
		}
	}
}

// get returns the member named name. rapidjson (Triton) answers the first
// of duplicate keys, a Python dict the last; last selects the latter.
func (v jval) get(name string, last bool) (jval, bool) {
	var found jval
	ok := false
	v.members(func(key, val jval) bool {
		if key.equalsString(name) {
			found, ok = val, true
			return last
		}
		return true
	})
	return found, ok
}

// equalsString reports whether the JSON string v decodes to s.
func (v jval) equalsString(s string) bool {
	raw := v[1 : len(v)-1]
	for _, c := range raw {
		if c == '\\' {
			return string(v.decodeString()) == s
		}
	}
	return string(raw) == s
}

// decodeString returns the bytes a JSON string stands for. Without escapes
// it aliases v.
func (v jval) decodeString() []byte {
	raw := v[1 : len(v)-1]
	esc := false
	for _, c := range raw {
		if c == '\\' {
			esc = true
			break
		}
	}
	if !esc {
		return raw
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 >= len(raw) {
			out = append(out, c)
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hex4(raw, i+1)
			i += 4
			if r >= 0xD800 && r <= 0xDBFF && i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo, ok := hex4(raw, i+3); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\', '/'
			out = append(out, raw[i])
		}
	}
	return out
}

// jnum is a JSON number as rapidjson classifies it: an integer literal
// that fits int64 and/or uint64, or else a double.
type jnum struct {
	isInt    bool // an integer literal (no fraction, exponent or NaN token)
	isInt64  bool
	isUint64 bool
	i        int64
	u        uint64
	f        float64
}

func (v jval) number() jnum {
	s := string(v)
	switch s {
	case "NaN", "-NaN":
		return jnum{f: math.NaN()}
	case "Infinity", "Inf":
		return jnum{f: math.Inf(1)}
	case "-Infinity", "-Inf":
		return jnum{f: math.Inf(-1)}
	}
	for _, c := range v {
		if c == '.' || c == 'e' || c == 'E' {
			f, _ := strconv.ParseFloat(s, 64)
			return jnum{f: f}
		}
	}
	n := jnum{isInt: true}
	if v[0] == '-' {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			n.isInt64, n.i, n.f = true, i, float64(i)
			return n
		}
	} else if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		n.isUint64, n.u, n.f = true, u, float64(u)
		if u <= math.MaxInt64 {
			n.isInt64, n.i = true, int64(u)
		}
		return n
	}
	n.f, _ = strconv.ParseFloat(s, 64)
	return n
}
