package tfresponse

// VersionStatus is one model version in a GET /v1/models/{m} answer
// (tensorflow.serving.ModelVersionStatus). Empty State and ErrorCode mean
// the enums' zero values, UNKNOWN and OK, as protobuf prints them.
type VersionStatus struct {
	// Version is the version number in decimal ("123"); protobuf prints
	// int64 fields quoted.
	Version string
	// State is UNKNOWN, START, LOADING, AVAILABLE, UNLOADING or END.
	State string
	// ErrorCode is a TF error code name ("OK", "NOT_FOUND", ...).
	ErrorCode string
	// ErrorMessage is "" when ErrorCode is OK.
	ErrorMessage string
}

// Status appends the body of TF Serving's model status answer
// (GetModelStatusResponse printed by protobuf's JSON printer with
// whitespace and all fields, docs/tfserving-rest.md §2.1): versions in the order given (TF
// lists them by descending version: the caller sorts), trailing newline.
func Status(dst []byte, versions []VersionStatus) []byte {
	p := protoWriter{buf: dst}
	p.open('{')
	p.key("model_version_status")
	p.open('[')
	for _, v := range versions {
		p.next()
		p.open('{')
		p.key("version")
		p.str(orDefault(v.Version, "0"))
		p.key("state")
		p.str(orDefault(v.State, "UNKNOWN"))
		p.key("status")
		p.open('{')
		p.key("error_code")
		p.str(orDefault(v.ErrorCode, "OK"))
		p.key("error_message")
		p.str(v.ErrorMessage)
		p.close('}')
		p.close('}')
	}
	p.close(']')
	p.close('}')
	return p.end()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
