package main

import (
	"io"
	"log/slog"
	"net"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// logOptions are the logging flags every command has.
type logOptions struct {
	level, format string
}

func defaultLog() logOptions { return logOptions{level: "info", format: "text"} }

func (o *logOptions) bindings() []binding {
	return []binding{
		enumFlag(&o.level, "log-level", "Log level: debug, info, warn or error. Every line of an exchange carries its request_id (Envoy's x-request-id); 5xx answers are logged at warn, 4xx at info.",
			[]string{"debug", "info", "warn", "error"}, slogLevel),
		enumFlag(&o.format, "log-format", "Log format: text or json.", []string{"text", "json"}, nil),
	}
}

// slogLevel accepts the other spellings slog takes ("warn+2").
func slogLevel(s string) bool {
	var lv slog.Level
	return lv.UnmarshalText([]byte(s)) == nil
}

func (o *logOptions) logger(w io.Writer) (*slog.Logger, error) {
	return observe.NewLogger(w, o.level, o.format)
}

// servingConfig is what a command that serves a bridge (extproc, proxy,
// demo) configures: the bridge's options, its listen addresses and
// logging. The flags set these fields directly.
type servingConfig struct {
	bridge bridge.Options
	addrs  bridge.Addrs
	log    logOptions
}

func newServingConfig(addrs bridge.Addrs) servingConfig {
	return servingConfig{bridge: bridge.DefaultOptions(), addrs: addrs, log: defaultLog()}
}

// fields returns the options the flags set, for fieldFlags.
func (o *servingConfig) fields() *bridge.Options { return &o.bridge }

// options returns the bridge options the flags set, logging to log.
func (o *servingConfig) options(log *slog.Logger) bridge.Options {
	b := o.bridge
	b.Logger = log
	return b
}

// check validates the options as the flags set them; prepare turns a
// *bridge.FieldError into the flag that set the field.
func (o *servingConfig) check() error {
	if err := o.bridge.Validate(); err != nil {
		return err
	}
	return checkModelMap(o.bridge.ModelMapFile)
}

// backendBindings are the v2 server's flags (not the demo's: it brings
// its own backend, so offering --backend there would only mislead).
func backendBindings(o *bridge.Options) []binding {
	return []binding{
		urlFlag(&o.BackendURL, "backend", "Root URL of the v2 inference server (Triton, KServe, MLServer).", false),
		enumFlag(&o.BackendKind, "backend-kind", "v2 server kind: auto (detect with GET /v2), triton, kserve or mlserver.",
			[]string{backend.KindAuto, "triton", "kserve", "mlserver"}, nil),
	}
}

// servingBindings are the flags of every command that serves a bridge.
func servingBindings(o *servingConfig) []binding {
	b := &o.bridge
	bs := []binding{
		durationFlag(&b.BackendTimeout, "backend-timeout", "Timeout of each metadata, config and readiness call to the v2 server."),
		durationFlag(&b.MetadataTTL, "metadata-ttl", "How long a model's fetched signature is reused."),
		durationFlag(&b.MetadataErrorTTL, "metadata-error-ttl", "How long a failed metadata fetch (unknown model, backend down) is remembered; 0 disables."),
		sizeFlag(&b.MaxBodyBytes, "max-body-bytes", "Largest request or response body translated, a `size` such as 64Mi, 64MiB or 67108864; larger ones get 413 (requests, refused at the headers when content-length says so) or 502 (responses)."),
		sizeFlag(&b.MaxInflightBytes, "max-inflight-bytes", "Memory budget of all translated exchanges together, a `size`: each body reserves its size times its amplification factor (20 for requests, 32 for responses) until the exchange ends; over it new TF requests get 503. The default is half of GOMEMLIMIT, or of the cgroup memory limit, else 4GiB.").
			defaultIs("derived"),
		intFlag(&b.MaxJSONDepth, "max-json-depth", "Deepest JSON nesting accepted in a body."),
		int64Flag(&b.MaxElements, "max-elements", "Most tensor elements one body may carry."),
		textFlag(&b.Passthrough, "passthrough", "Which requests other than TF Serving's reach the v2 server, a `policy`: none, inference (the v2 inference endpoints: health, server and model metadata, model readiness, infer) or all; the rest get a TF-style 404.").
			completes("none", "inference", "all"),
		addrFlag(&o.addrs.Admin, "metrics-addr", "Address of the admin server (/metrics, /healthz, /readyz); empty disables it.", true, true),
		boolFlag(&b.Pprof, "pprof", "Serve Go's runtime profiles (CPU, heap, goroutine, block, mutex, trace) under /debug/pprof/ on the admin server, and sample blocking and mutex contention for them (process-wide while on). Off by default: profiles cost CPU while they run and show the process's insides, so turn it on only where the admin port is private."),
		durationFlag(&b.ShutdownTimeout, "shutdown-timeout", "On SIGTERM, after --drain-delay, how long in-flight requests may take to finish."),
		fileFlag(&b.ModelMapFile, "model-map", "YAML model map: labels, signatures, renamed models and tensors, several v2 servers. Polled every 2s and reloaded when it changes; a bad file at start is a usage error naming the line. Empty maps nothing (the demo then uses a small map of its own)."),
	}
	bs = append(bs, o.log.bindings()...)
	bs = append(bs, shadowBindings(b)...)
	return append(bs, opsBindings(b)...)
}

// buildBridge assembles the bridge from the options a command's flags
// set, logging to stderr as its log flags say.
func buildBridge(o *servingConfig, stderr io.Writer) (*bridge.Bridge, error) {
	log, err := o.log.logger(stderr)
	if err != nil {
		return nil, err
	}
	b, err := bridge.New(o.options(log))
	if err == nil {
		log.Info("tfsbridge memory bounds", "max_inflight_bytes", b.Session.Admission.Limit(), "go_memory_limit", admission.MemoryLimit())
	}
	return b, err
}

// listenAttrs are the start log line's addresses of the servers l
// serves; a server that is off (an empty address) is left out rather
// than logged as <nil>.
func listenAttrs(l bridge.Listeners) []any {
	var attrs []any
	for _, x := range []struct {
		key string
		lis net.Listener
	}{{"grpc_addr", l.Extproc}, {"http_addr", l.Proxy}, {"metrics_addr", l.Admin}, {"tf_grpc_addr", l.TFGRPC}} {
		if x.lis != nil {
			attrs = append(attrs, x.key, x.lis.Addr().String())
		}
	}
	return attrs
}
