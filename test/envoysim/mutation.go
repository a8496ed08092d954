package envoysim

import (
	"fmt"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"golang.org/x/net/http/httpguts"
)

// Envoy's HTTP connection manager defaults (max_request_headers_count, max_request_headers_kb);
// ext_proc refuses a mutation whose input or result exceeds them.
const (
	maxHeadersCount = 100
	maxHeadersKB    = 60
)

// mutationError is a mutation Envoy refuses with an error (not silently): the exchange ends
// in a local reply with status_on_error and this text as the response code details.
type mutationError struct{ details string }

func (e mutationError) Error() string { return e.details }

// mutationResult reports what a header mutation did besides succeeding or failing.
type mutationResult struct {
	// ignored lists mutations Envoy drops silently; each one counts in
	// rejected_header_mutations (a failing one too, as in Envoy).
	ignored []string
	// emptied lists set_headers entries given only in the string `value`: Envoy reads
	// raw_value alone, so it sets these headers to "" (envoy#31555, intentional since 1.27).
	emptied []string
	// notes lists fields Envoy ignores without counting (append_action),
	// formatted only when the journal takes them.
	notes []appendActionNote
	// droppedContentLength counts content-length sets skipped because the mode strips it.
	droppedContentLength int
}

// mutationOp is the operation Envoy's mutation-rules checker is asked about.
type mutationOp uint8

const (
	opSet mutationOp = iota
	opAppend
	opRemove
)

// routingHeaders are the "extra routing headers" of Envoy's mutation rules: with the default
// allow_all_routing=false a processor may not touch them (":path" is deliberately absent).
var routingHeaders = map[string]bool{"host": true, ":authority": true, ":method": true, ":scheme": true}

// applyHeaderMutation applies m to h under Envoy's default HeaderMutationRules, in Envoy's
// order: size check, removals, then sets, then a check of the resulting map. replacing is
// true for a CONTINUE_AND_REPLACE reply (the only case where ":method" may change);
// skipContentLength drops content-length sets in the modes where Envoy strips it.
func applyHeaderMutation(h *headerMap, m *extprocv3.HeaderMutation, replacing, skipContentLength bool) (mutationResult, error) {
	var res mutationResult
	if nr, ns := len(m.GetRemoveHeaders()), len(m.GetSetHeaders()); nr > maxHeadersCount || ns > maxHeadersCount {
		res.ignored = append(res.ignored, "whole mutation (too many entries)")
		return res, mutationError{fmt.Sprintf("Header mutation remove header count %d or set header count %d exceed the HCM header countlimit %d", nr, ns, maxHeadersCount)}
	}
	for _, name := range m.GetRemoveHeaders() {
		if !validHeaderName(name) {
			res.ignored = append(res.ignored, fmt.Sprintf("remove %q (invalid name)", name))
			return res, mutationError{"Invalid character in remove_headers mutation."}
		}
		key := strings.ToLower(name)
		if reason := checkMutation(opRemove, key, ""); reason != "" {
			res.ignored = append(res.ignored, fmt.Sprintf("remove %s (%s)", key, reason))
			continue
		}
		h.del(key)
	}
	for _, opt := range m.GetSetHeaders() {
		hv := opt.GetHeader()
		if hv == nil {
			continue
		}
		if skipContentLength && strings.EqualFold(hv.GetKey(), "content-length") {
			res.droppedContentLength++
			continue
		}
		if hv.GetValue() != "" && len(hv.GetRawValue()) > 0 {
			res.ignored = append(res.ignored, fmt.Sprintf("set %s (both value and raw_value)", hv.GetKey()))
			return res, mutationError{"Only one of value or raw_value in the HeaderValue message should be set."}
		}
		value := string(hv.GetRawValue())
		if !validHeaderName(hv.GetKey()) || !httpguts.ValidHeaderFieldValue(value) {
			res.ignored = append(res.ignored, fmt.Sprintf("set %q (invalid character)", hv.GetKey()))
			return res, mutationError{"Invalid character in set_headers mutation."}
		}
		key := strings.ToLower(hv.GetKey())
		//nolint:staticcheck // ext_proc honours only the deprecated append field, not append_action (docs/envoy-extproc.md)
		if opt.GetAppend() == nil && opt.GetAppendAction() != corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
			res.notes = append(res.notes, appendActionNote{key: key, action: opt.GetAppendAction()})
		}
		appendValue := opt.GetAppend().GetValue() //nolint:staticcheck // as above: the field Envoy reads

		op := opSet
		if appendValue && h.has(key) {
			op = opAppend
		}
		reason := checkMutation(op, key, value)
		if replacing && key == ":method" {
			reason = ""
		}
		if reason != "" {
			res.ignored = append(res.ignored, fmt.Sprintf("set %s (%s)", key, reason))
			continue
		}
		if hv.GetValue() != "" {
			res.emptied = append(res.emptied, key)
		}
		if appendValue {
			h.add(key, value)
		} else {
			h.set(key, value)
		}
	}
	if n, size := len(h.entries), h.byteSize(); n > maxHeadersCount || size > maxHeadersKB*1024 {
		res.ignored = append(res.ignored, "whole mutation (result too large)")
		return res, mutationError{fmt.Sprintf("Header mutation causes end result header count %d or header size %d bytes, exceeding the count limit %d or the size limit %d kilobytes", n, size, maxHeadersCount, maxHeadersKB)}
	}
	return res, nil
}

// appendActionNote is the note that a set's append_action was ignored.
// It is formatted only when printed: a processor that sets append_action on
// every header (tfsbridge does) would otherwise pay the stand-in two
// fmt.Sprintf calls per header, tens of microseconds per exchange that Envoy
// does not spend, long after the journal is full.
type appendActionNote struct {
	key    string
	action corev3.HeaderValueOption_HeaderAppendAction
}

func (n appendActionNote) String() string {
	return fmt.Sprintf("set %s: append_action %s is ignored by ext_proc (only the deprecated append field counts; default overwrite)", n.key, n.action)
}

// checkMutation is Envoy's mutation-rules Checker with default rules: it returns why the
// operation is ignored, or "" when it is allowed.
func checkMutation(op mutationOp, key, value string) string {
	if op == opRemove && (strings.HasPrefix(key, ":") || key == "host") {
		return "pseudo-headers and host cannot be removed"
	}
	if routingHeaders[key] {
		return "routing header, allow_all_routing is false"
	}
	if strings.HasPrefix(key, ":") && op == opAppend {
		return "a pseudo-header cannot take a second value"
	}
	if strings.HasPrefix(key, "x-envoy") {
		return "x-envoy header, allow_envoy is false"
	}
	if op != opRemove && key == ":status" {
		if n, err := strconv.ParseUint(value, 10, 32); err != nil || n < 200 {
			return "invalid :status value"
		}
	}
	return ""
}

// validHeaderName is Envoy's HeaderUtility::headerNameIsValid: pseudo-header names use the
// HTTP/2 rule (lower-case token characters after the colon), others the HTTP/1 token rule.
// Unlike Envoy, an empty name is refused (Envoy would build an unusable entry).
func validHeaderName(name string) bool {
	if rest, ok := strings.CutPrefix(name, ":"); ok {
		return rest != "" && httpguts.ValidHeaderFieldName(rest) && rest == strings.ToLower(rest)
	}
	return httpguts.ValidHeaderFieldName(name)
}

// applyBodyMutation returns body after m, as Envoy's MutationUtils::applyBodyMutations:
// body replaces, clear_body=true empties, anything else (clear_body=false, streamed_response,
// no oneof) leaves the body alone.
func applyBodyMutation(body []byte, m *extprocv3.BodyMutation) []byte {
	switch mm := m.GetMutation().(type) {
	case *extprocv3.BodyMutation_Body:
		if mm.Body == nil {
			return []byte{}
		}
		return mm.Body
	case *extprocv3.BodyMutation_ClearBody:
		if mm.ClearBody {
			return []byte{}
		}
	}
	return body
}

// checkContentLength is ProcessorState::validateContentLength (BUFFERED body reply with the
// headers still held): a parseable content-length must equal the size of body_mutation.body,
// which is 0 for clear_body and for a BodyMutation with no oneof set.
func checkContentLength(h *headerMap, m *extprocv3.BodyMutation) error {
	if h == nil {
		return nil
	}
	cl, ok := h.get("content-length")
	if !ok {
		return nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(cl), 10, 64)
	if err != nil {
		return nil
	}
	if n != uint64(len(m.GetBody())) {
		return mutationError{"mismatch between content length and the length of the mutated body"}
	}
	return nil
}
