package jsontext

// What a reader that gets its input in chunks (and so cannot use Parse)
// needs to report rapidjson's errors exactly as Parse does.

// rapidjson's messages for a token met where it does not belong (its
// HandleError per parsing state), and tfsbridge's own bounds, for readers
// that track the state themselves.
const (
	MsgDocumentEmpty     = msgDocumentEmpty     // before the root value
	MsgValueInvalid      = msgValueInvalid      // where a value is expected
	MsgObjectMissName    = msgObjectMissName    // after '{' or a member's ','
	MsgObjectMissColon   = msgObjectMissColon   // after a key
	MsgObjectMissComma   = msgObjectMissComma   // after a member's value
	MsgArrayMissComma    = msgArrayMissComma    // after an element
	MsgMissQuotationMark = msgMissQuotationMark // a string the input ends in
	MsgTooDeep           = msgTooDeep           // tfsbridge's nesting bound
	MsgTooManyVals       = msgTooManyVals       // tfsbridge's value bound
)

// ScanNumber is ParseNumber with rapidjson's error: the message and its
// offset in data when the token is not a number.
func ScanNumber(data []byte, p int) (n Num, end int, err *SyntaxError) {
	end, flags, bits, err := parseNumber(data, p)
	return Num{flags, bits}, end, err
}
