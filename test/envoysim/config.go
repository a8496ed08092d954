package envoysim

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
)

// Envoy defaults the stand-in reproduces when a Config field is left zero.
const (
	// DefaultMessageTimeout is ext_proc's message_timeout default (200 ms): far too short for
	// large bodies, which is why deployments (and tests) set seconds.
	DefaultMessageTimeout = 200 * time.Millisecond
	// DefaultBufferLimit is Envoy's per_connection_buffer_limit_bytes default (1 MiB).
	DefaultBufferLimit = 1 << 20
	// DefaultUpstreamTimeout is the route timeout Envoy applies when none is configured.
	DefaultUpstreamTimeout = 15 * time.Second
	// DefaultStatusOnError is ext_proc's status_on_error default.
	DefaultStatusOnError = 500
	// DefaultDownstreamReadSize bounds one data callback of the downstream request body
	// (Envoy reads sockets in 16 KiB slices).
	DefaultDownstreamReadSize = 16 << 10
	// DefaultMaxStreamedChunk is our own rule for FULL_DUPLEX_STREAMED: a streamed_response
	// chunk above it is a violation (the spec recommends at most ~64 KiB per message).
	DefaultMaxStreamedChunk = 64 << 10
)

// Config describes the Envoy being simulated: one listener, one route to Upstream, and an
// ext_proc filter (in the HTTP connection manager, before the router) talking to
// ProcessorAddr.
type Config struct {
	// ProcessorAddr is the ext_proc gRPC server, "host:port" (plaintext HTTP/2).
	ProcessorAddr string
	// UpstreamHTTP2 makes the cluster speak HTTP/2 with prior knowledge (h2c), as a cluster
	// with http2_protocol_options does: what a gRPC upstream (the v2 server's gRPC port)
	// needs. The downstream listener always accepts both HTTP/1.1 and h2c (codec_type AUTO).
	UpstreamHTTP2 bool
	// Upstream is the base URL of the cluster, e.g. "http://127.0.0.1:8000"; the request's
	// (possibly rewritten) :path is appended to it.
	Upstream string
	// Mode is the filter's processing_mode. Nil means DefaultMode(). Header and trailer
	// modes may be SEND or SKIP; body modes NONE, BUFFERED or FULL_DUPLEX_STREAMED (the
	// others are not modelled and make Start fail). FULL_DUPLEX_STREAMED needs trailer
	// mode SEND in its direction, as Envoy requires.
	Mode *extprocfilterv3.ProcessingMode
	// AllowModeOverride is allow_mode_override.
	AllowModeOverride bool
	// FailureModeAllow is failure_mode_allow (fail open on gRPC errors, timeouts and
	// spurious replies).
	FailureModeAllow bool
	// MessageTimeout is message_timeout; zero means DefaultMessageTimeout.
	MessageTimeout time.Duration
	// MaxMessageTimeout is max_message_timeout; zero means override_message_timeout
	// replies are ignored (and counted), as in Envoy.
	MaxMessageTimeout time.Duration
	// StatusOnError is status_on_error; zero means DefaultStatusOnError.
	StatusOnError int
	// BufferLimit is per_connection_buffer_limit_bytes: a BUFFERED request body over it is
	// refused with a local 413, a BUFFERED response body over it with a local 500. Zero
	// means DefaultBufferLimit.
	BufferLimit int
	// BufferFilterMaxBytes > 0 puts an envoy.filters.http.buffer filter with this
	// max_request_bytes in front of ext_proc: it buffers the whole request first (413 when
	// over, before ext_proc saw anything, so the ext_proc stream starts at response
	// headers), adds a content-length when missing and raises the request buffer limit
	// of the filters after it to this value.
	BufferFilterMaxBytes int
	// HeaderRoutes are routes matched before the default one (to Upstream); clear_route_cache
	// with a request header mutation re-runs the match, as in Envoy.
	HeaderRoutes []HeaderRoute
	// UpstreamTimeout is the route timeout (504 "upstream request timeout"); zero means
	// DefaultUpstreamTimeout, negative disables it.
	UpstreamTimeout time.Duration
	// DownstreamReadSize is the most bytes of the request body one data callback carries,
	// so with FULL_DUPLEX_STREAMED the largest request_body message (the stand-in hands on
	// what one read of the downstream connection returns, up to this size). Zero means
	// DefaultDownstreamReadSize. The response body reaches the filter as the upstream's
	// reads return it: each write the upstream flushes is normally one data callback.
	DownstreamReadSize int
	// MaxStreamedChunk is the largest streamed_response body a FULL_DUPLEX_STREAMED reply
	// may carry before the stand-in records a violation (our own rule, not Envoy's: Envoy
	// takes any size). Zero means DefaultMaxStreamedChunk.
	MaxStreamedChunk int
	// GRPCGoWindows gives the stand-in's gRPC client to the processor grpc-go's own HTTP/2
	// receive windows (64 KiB, grown by its BDP estimate) instead of Envoy's fixed defaults
	// (16 MiB a stream, 24 MiB the connection). A test that measures the heap of a process
	// the stand-in shares sets it: a 16 MiB window lets replies wait in the stand-in, memory
	// a real Envoy holds in its own process, not the processor's.
	GRPCGoWindows bool

	// onInbox, when set (by this package's tests only), sees each reply as the stand-in
	// takes it in, ready for the filter. A test whose verdict needs a reply to be in before
	// a later step (a stray reply before the response comes) waits for it here: the
	// stand-in finds such replies only when it next looks, so nothing else tells.
	onInbox func(*extprocv3.ProcessingResponse)
}

// GRPCMode returns the processing mode of docs/grpc.md for TF gRPC routes (spec §5.2):
// DefaultMode with response trailers SEND, so the processor can rewrite grpc-status and
// grpc-message in the trailers.
func GRPCMode() *extprocfilterv3.ProcessingMode {
	m := DefaultMode()
	m.ResponseTrailerMode = extprocfilterv3.ProcessingMode_SEND
	return m
}

// DefaultMode returns the processing mode of docs/architecture.md: request and response headers
// SEND, both bodies BUFFERED, trailers SKIP.
func DefaultMode() *extprocfilterv3.ProcessingMode {
	return &extprocfilterv3.ProcessingMode{
		RequestHeaderMode:   extprocfilterv3.ProcessingMode_SEND,
		ResponseHeaderMode:  extprocfilterv3.ProcessingMode_SEND,
		RequestBodyMode:     extprocfilterv3.ProcessingMode_BUFFERED,
		ResponseBodyMode:    extprocfilterv3.ProcessingMode_BUFFERED,
		RequestTrailerMode:  extprocfilterv3.ProcessingMode_SKIP,
		ResponseTrailerMode: extprocfilterv3.ProcessingMode_SKIP,
	}
}

// FullDuplexMode returns the full-duplex processing mode of
// deploy/envoy/envoy-full-duplex.yaml: headers SEND, both bodies
// FULL_DUPLEX_STREAMED, trailers SEND (Envoy requires it with that mode).
func FullDuplexMode() *extprocfilterv3.ProcessingMode {
	m := DefaultMode()
	m.RequestBodyMode = extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	m.ResponseBodyMode = extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	m.RequestTrailerMode = extprocfilterv3.ProcessingMode_SEND
	m.ResponseTrailerMode = extprocfilterv3.ProcessingMode_SEND
	return m
}

// normalized returns a copy of c with defaults filled in, or why it cannot be simulated.
func (c Config) normalized() (Config, *url.URL, error) {
	if c.ProcessorAddr == "" {
		return c, nil, errors.New("envoysim: ProcessorAddr is required")
	}
	u, err := url.Parse(c.Upstream)
	if err != nil {
		return c, nil, fmt.Errorf("envoysim: upstream URL: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return c, nil, fmt.Errorf("envoysim: upstream %q must be an http://host:port URL", c.Upstream)
	}
	if c.Mode == nil {
		c.Mode = DefaultMode()
	} else {
		c.Mode = proto.Clone(c.Mode).(*extprocfilterv3.ProcessingMode)
	}
	if err := checkModelled(c.Mode); err != nil {
		return c, nil, err
	}
	if c.MessageTimeout == 0 {
		c.MessageTimeout = DefaultMessageTimeout
	}
	if c.MessageTimeout < 0 || c.MaxMessageTimeout < 0 {
		return c, nil, errors.New("envoysim: negative message timeout")
	}
	if c.StatusOnError == 0 {
		c.StatusOnError = DefaultStatusOnError
	}
	if c.StatusOnError < 200 || c.StatusOnError > 599 {
		return c, nil, fmt.Errorf("envoysim: status_on_error %d out of range", c.StatusOnError)
	}
	if c.BufferLimit == 0 {
		c.BufferLimit = DefaultBufferLimit
	}
	if c.BufferLimit < 0 || c.BufferFilterMaxBytes < 0 {
		return c, nil, errors.New("envoysim: negative buffer limit")
	}
	if c.UpstreamTimeout == 0 {
		c.UpstreamTimeout = DefaultUpstreamTimeout
	}
	if c.DownstreamReadSize == 0 {
		c.DownstreamReadSize = DefaultDownstreamReadSize
	}
	if c.MaxStreamedChunk == 0 {
		c.MaxStreamedChunk = DefaultMaxStreamedChunk
	}
	if c.DownstreamReadSize < 0 || c.MaxStreamedChunk < 0 {
		return c, nil, errors.New("envoysim: negative read size or streamed chunk limit")
	}
	return c, u, nil
}

// checkModelled refuses the parts of ProcessingMode the stand-in does not simulate, and
// what Envoy itself rejects: FULL_DUPLEX_STREAMED needs trailer mode SEND in its direction
// (ext_proc's config validation).
func checkModelled(m *extprocfilterv3.ProcessingMode) error {
	dirs := []struct {
		name    string
		body    extprocfilterv3.ProcessingMode_BodySendMode
		trailer extprocfilterv3.ProcessingMode_HeaderSendMode
	}{
		{"request", m.GetRequestBodyMode(), m.GetRequestTrailerMode()},
		{"response", m.GetResponseBodyMode(), m.GetResponseTrailerMode()},
	}
	for _, d := range dirs {
		duplex := d.body == extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
		if !duplex && !bodyModeModelled(d.body) {
			return fmt.Errorf("envoysim: body mode %s is not modelled (NONE, BUFFERED and FULL_DUPLEX_STREAMED are)", d.body)
		}
		if duplex && d.trailer != extprocfilterv3.ProcessingMode_SEND {
			// Envoy's own wording (ext_proc config validation).
			return fmt.Errorf("envoysim: if the ext_proc filter has the %s_body_mode set to FULL_DUPLEX_STREAMED, then the %s_trailer_mode has to be set to SEND", d.name, d.name)
		}
	}
	return nil
}

// bodyModeModelled reports whether the stand-in simulates a switch to body mode b by
// mode_override (FULL_DUPLEX_STREAMED is modelled only when configured).
func bodyModeModelled(b extprocfilterv3.ProcessingMode_BodySendMode) bool {
	return b == extprocfilterv3.ProcessingMode_NONE || b == extprocfilterv3.ProcessingMode_BUFFERED
}

// isDuplex reports whether the configured mode streams either body in FULL_DUPLEX_STREAMED
// (Envoy then ignores every mode_override).
func isDuplex(m *extprocfilterv3.ProcessingMode) bool {
	return m.GetRequestBodyMode() == extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED ||
		m.GetResponseBodyMode() == extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
}

// effectiveModeOverride is Envoy's rule for a mode_override: DEFAULT header/trailer modes
// keep the filter's configured value, body modes are always taken from the override (so an
// override that only names the request body mode also sets the response body mode to NONE).
func effectiveModeOverride(override, configured *extprocfilterv3.ProcessingMode) *extprocfilterv3.ProcessingMode {
	out := proto.Clone(configured).(*extprocfilterv3.ProcessingMode)
	if v := override.GetRequestHeaderMode(); v != extprocfilterv3.ProcessingMode_DEFAULT {
		out.RequestHeaderMode = v
	}
	if v := override.GetResponseHeaderMode(); v != extprocfilterv3.ProcessingMode_DEFAULT {
		out.ResponseHeaderMode = v
	}
	if v := override.GetRequestTrailerMode(); v != extprocfilterv3.ProcessingMode_DEFAULT {
		out.RequestTrailerMode = v
	}
	if v := override.GetResponseTrailerMode(); v != extprocfilterv3.ProcessingMode_DEFAULT {
		out.ResponseTrailerMode = v
	}
	out.RequestBodyMode = override.GetRequestBodyMode()
	out.ResponseBodyMode = override.GetResponseBodyMode()
	return out
}
