package deploy

import (
	"fmt"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
)

// bodyMode is how Envoy runs tfsbridge's filter, named as tfsbridge's
// --body-mode names it. Every data plane exists in both modes, and each
// layout, bootstrap and chart value set declares which one it is.
type bodyMode string

const (
	// buffered: Envoy holds each whole body, within its buffer limit, and
	// sends it in one message; message_timeout bounds each reply.
	buffered bodyMode = "buffered"
	// fullDuplex: Envoy streams body chunks both ways (FULL_DUPLEX_STREAMED);
	// no Envoy buffer limit or message_timeout applies, tfsbridge's own
	// --max-body-bytes and per-exchange deadline do.
	fullDuplex bodyMode = "full-duplex"
)

// bodyModes are the modes the manifests are written for.
var bodyModes = []bodyMode{buffered, fullDuplex}

// bodyModeFlagValues are the values --body-mode accepts; auto follows the
// mode Envoy announces on each stream (buffered when it announces none).
var bodyModeFlagValues = []string{"auto", string(buffered), string(fullDuplex)}

// maxStreamingBuffer is the largest buffer limit a full-duplex data plane
// should set: Envoy's own default. Nothing is held whole, so a larger one
// only lets Envoy queue more per connection.
const maxStreamingBuffer = 1 << 20

// processingMode is the filter's processing_mode in this body mode
// (docs/architecture.md; docs/envoy-extproc.md, "Body modes").
func (m bodyMode) processingMode() *extprocv3.ProcessingMode {
	pm := &extprocv3.ProcessingMode{
		RequestHeaderMode:   extprocv3.ProcessingMode_SEND,
		ResponseHeaderMode:  extprocv3.ProcessingMode_SEND,
		RequestBodyMode:     extprocv3.ProcessingMode_BUFFERED,
		ResponseBodyMode:    extprocv3.ProcessingMode_BUFFERED,
		RequestTrailerMode:  extprocv3.ProcessingMode_SKIP,
		ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
	}
	if m == fullDuplex {
		pm.RequestBodyMode, pm.ResponseBodyMode = extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED, extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED
		pm.RequestTrailerMode, pm.ResponseTrailerMode = extprocv3.ProcessingMode_SEND, extprocv3.ProcessingMode_SEND
	}
	return pm
}

// egBody is Envoy Gateway's name for the body mode.
func (m bodyMode) egBody() egv1a1.ExtProcBodyProcessingMode {
	if m == fullDuplex {
		return egv1a1.FullDuplexStreamedExtBodyProcessingMode
	}
	return egv1a1.BufferedExtProcBodyProcessingMode
}

// bodyModeOf tells which of our modes a processing_mode is, after checking
// the rules Envoy and tfsbridge impose on any processing_mode: one body mode
// for both directions (tfsbridge's flag names one), and FULL_DUPLEX_STREAMED
// only with that direction's trailers SEND (Envoy rejects the config
// otherwise).
func bodyModeOf(pm *extprocv3.ProcessingMode) (bodyMode, error) {
	for _, d := range []struct {
		dir     string
		body    extprocv3.ProcessingMode_BodySendMode
		trailer extprocv3.ProcessingMode_HeaderSendMode
	}{
		{"request", pm.GetRequestBodyMode(), pm.GetRequestTrailerMode()},
		{"response", pm.GetResponseBodyMode(), pm.GetResponseTrailerMode()},
	} {
		if d.body == extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED && d.trailer != extprocv3.ProcessingMode_SEND {
			return "", fmt.Errorf("%s body FULL_DUPLEX_STREAMED with trailers %s: Envoy rejects it without SEND", d.dir, d.trailer)
		}
	}
	if pm.GetRequestBodyMode() != pm.GetResponseBodyMode() {
		return "", fmt.Errorf("request body %s, response body %s: tfsbridge runs one body mode both ways", pm.GetRequestBodyMode(), pm.GetResponseBodyMode())
	}
	for _, m := range bodyModes {
		if m.processingMode().GetRequestBodyMode() == pm.GetRequestBodyMode() {
			return m, nil
		}
	}
	return "", fmt.Errorf("body mode %s is neither of %v", pm.GetRequestBodyMode(), bodyModes)
}

// layoutOf returns the one layout of a family (directory → body mode) that
// runs mode.
func layoutOf(t *testing.T, layouts map[string]bodyMode, mode bodyMode) string {
	t.Helper()
	var found []string
	for dir, m := range layouts {
		if m == mode {
			found = append(found, dir)
		}
	}
	if len(found) != 1 {
		t.Fatalf("layouts %v: %d run %s, want 1", layouts, len(found), mode)
	}
	return found[0]
}

// egProcessingMode is the processing_mode Envoy Gateway renders for an
// EnvoyExtensionPolicy's processingMode, as its API documents: a request or
// response entry sends that direction's headers, its body is the named mode,
// and FullDuplexStreamed also sends that direction's trailers.
func egProcessingMode(pm *egv1a1.ExtProcProcessingMode) *extprocv3.ProcessingMode {
	out := &extprocv3.ProcessingMode{
		RequestHeaderMode:   extprocv3.ProcessingMode_SKIP,
		ResponseHeaderMode:  extprocv3.ProcessingMode_SKIP,
		RequestTrailerMode:  extprocv3.ProcessingMode_SKIP,
		ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
	}
	if pm == nil {
		return out
	}
	body := func(o *egv1a1.ProcessingModeOptions) (extprocv3.ProcessingMode_BodySendMode, extprocv3.ProcessingMode_HeaderSendMode) {
		if o.Body == nil {
			return extprocv3.ProcessingMode_NONE, extprocv3.ProcessingMode_SKIP
		}
		switch *o.Body {
		case egv1a1.BufferedExtProcBodyProcessingMode:
			return extprocv3.ProcessingMode_BUFFERED, extprocv3.ProcessingMode_SKIP
		case egv1a1.StreamedExtProcBodyProcessingMode:
			return extprocv3.ProcessingMode_STREAMED, extprocv3.ProcessingMode_SKIP
		case egv1a1.BufferedPartialExtBodyHeaderProcessingMode:
			return extprocv3.ProcessingMode_BUFFERED_PARTIAL, extprocv3.ProcessingMode_SKIP
		case egv1a1.FullDuplexStreamedExtBodyProcessingMode:
			return extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED, extprocv3.ProcessingMode_SEND
		}
		return extprocv3.ProcessingMode_NONE, extprocv3.ProcessingMode_SKIP
	}
	if pm.Request != nil {
		out.RequestHeaderMode = extprocv3.ProcessingMode_SEND
		out.RequestBodyMode, out.RequestTrailerMode = body(pm.Request)
	}
	if pm.Response != nil {
		out.ResponseHeaderMode = extprocv3.ProcessingMode_SEND
		out.ResponseBodyMode, out.ResponseTrailerMode = body(pm.Response)
	}
	return out
}

// TestBodyModeRules shows that bodyModeOf, which every data plane's ext_proc
// config goes through, accepts our two modes and refuses what Envoy or
// tfsbridge would.
func TestBodyModeRules(t *testing.T) {
	for _, m := range bodyModes {
		if got, err := bodyModeOf(m.processingMode()); err != nil || got != m {
			t.Errorf("%s: bodyModeOf = %q, %v", m, got, err)
		}
		eg := m.egBody()
		if diff := protoDiff(m.processingMode(), egProcessingMode(&egv1a1.ExtProcProcessingMode{
			Request: &egv1a1.ProcessingModeOptions{Body: &eg}, Response: &egv1a1.ProcessingModeOptions{Body: &eg},
		})); diff != "" {
			t.Errorf("%s: Envoy Gateway's %s renders another processing_mode:\n%s", m, eg, diff)
		}
	}
	bad := map[string]func(*extprocv3.ProcessingMode){
		"full duplex without request trailers": func(pm *extprocv3.ProcessingMode) { pm.RequestTrailerMode = extprocv3.ProcessingMode_SKIP },
		"full duplex without response trailers": func(pm *extprocv3.ProcessingMode) {
			pm.ResponseTrailerMode = extprocv3.ProcessingMode_DEFAULT
		},
		"full duplex one way only": func(pm *extprocv3.ProcessingMode) {
			pm.ResponseBodyMode, pm.ResponseTrailerMode = extprocv3.ProcessingMode_BUFFERED, extprocv3.ProcessingMode_SKIP
		},
		"streamed": func(pm *extprocv3.ProcessingMode) {
			pm.RequestBodyMode, pm.ResponseBodyMode = extprocv3.ProcessingMode_STREAMED, extprocv3.ProcessingMode_STREAMED
		},
	}
	for name, damage := range bad {
		pm := fullDuplex.processingMode()
		damage(pm)
		if m, err := bodyModeOf(pm); err == nil {
			t.Errorf("%s: accepted as %s", name, m)
		}
	}
}
