package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// logOptions are the logging flags every command has.
type logOptions struct {
	level, format string
}

func (o *logOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.level, "log-level", "info", "Log level: debug, info, warn or error.")
	fs.StringVar(&o.format, "log-format", "text", "Log format: text or json.")
}

// validate refuses a bad --log-level or --log-format before anything
// runs, as the usage error it is.
func (o *logOptions) validate() error {
	if _, err := observe.NewLogger(io.Discard, o.level, "text"); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if _, err := observe.NewLogger(io.Discard, "info", o.format); err != nil {
		return fmt.Errorf("--log-format: %w", err)
	}
	return nil
}

func (o *logOptions) logger(w io.Writer) (*slog.Logger, error) {
	return observe.NewLogger(w, o.level, o.format)
}

// bridgeOptions are the flags shared by extproc and proxy: the backend,
// the limits, metrics and shutdown. Their defaults are bridge's.
type bridgeOptions struct {
	log              logOptions
	backendURL       string
	backendKind      string
	backendTimeout   time.Duration
	metadataTTL      time.Duration
	metadataErrorTTL time.Duration
	maxBody          byteSize
	maxInflight      byteSize
	maxDepth         int
	maxElements      int64
	passthrough      session.Passthrough
	metricsAddr      string
	pprof            bool
	shutdownTimeout  time.Duration
	modelMap         string
	ops              opsOptions
}

func (o *bridgeOptions) register(fs *pflag.FlagSet) {
	d := bridge.DefaultOptions()
	fs.StringVar(&o.backendURL, "backend", d.BackendURL, "Root URL of the v2 inference server (Triton, KServe, MLServer).")
	fs.StringVar(&o.backendKind, "backend-kind", d.BackendKind, "v2 server kind: auto (detect with GET /v2), triton, kserve or mlserver.")
	o.registerServing(fs)
}

// registerServing registers every shared flag but the backend's: the demo
// brings its own backend, so offering --backend there would only mislead.
func (o *bridgeOptions) registerServing(fs *pflag.FlagSet) {
	d := bridge.DefaultOptions()
	o.log.register(fs)
	fs.DurationVar(&o.backendTimeout, "backend-timeout", d.BackendTimeout, "Timeout of each metadata, config and readiness call to the v2 server.")
	fs.DurationVar(&o.metadataTTL, "metadata-ttl", d.MetadataTTL, "How long a model's fetched signature is reused.")
	fs.DurationVar(&o.metadataErrorTTL, "metadata-error-ttl", d.MetadataErrorTTL, "How long a failed metadata fetch (unknown model, backend down) is remembered; 0 disables.")
	o.maxBody = byteSize(d.MaxBodyBytes)
	fs.Var(&o.maxBody, "max-body-bytes", "Largest request or response body translated, a `size` such as 64Mi, 64MiB or 67108864; larger ones get 413.")
	o.maxInflight = byteSize(d.MaxInflightBytes)
	fs.Var(&o.maxInflight, "max-inflight-bytes", "Memory budget of all translated exchanges together, a `size`: each body reserves its size times its amplification factor (20 for requests, 32 for responses) until the exchange ends; over it new TF requests get 503. The default is half of GOMEMLIMIT, or of the cgroup memory limit, else 4GiB.")
	fs.IntVar(&o.maxDepth, "max-json-depth", d.MaxJSONDepth, "Deepest JSON nesting accepted in a body.")
	fs.Int64Var(&o.maxElements, "max-elements", d.MaxElements, "Most tensor elements one body may carry.")
	fs.TextVar(&o.passthrough, "passthrough", d.Passthrough,
		"Which requests other than TF Serving's reach the v2 server, a `policy`: none, inference (the v2 inference endpoints: health, server and model metadata, model readiness, infer) or all; the rest get a TF-style 404.")
	fs.StringVar(&o.metricsAddr, "metrics-addr", bridge.DefaultMetricsAddr, "Address of the admin server (/metrics, /healthz, /readyz); empty disables it.")
	fs.BoolVar(&o.pprof, "pprof", false, "Serve Go's runtime profiles (CPU, heap, goroutine, block, mutex, trace) under /debug/pprof/ on the admin server, and sample blocking and mutex contention for them.")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "On SIGTERM, how long in-flight requests may take to finish.")
	fs.StringVar(&o.modelMap, "model-map", "", "YAML model map: labels, signatures, renamed models and tensors, several v2 servers (re-read when it changes); empty maps nothing.")
	o.ops.register(fs)
}

// options returns the bridge options the flags set; the proxy's timeouts
// keep their defaults (proxyOptions sets them).
func (o *bridgeOptions) options(log *slog.Logger) bridge.Options {
	b := bridge.DefaultOptions()
	b.BackendURL = o.backendURL
	b.BackendKind = o.backendKind
	b.BackendTimeout = o.backendTimeout
	b.MetadataTTL = o.metadataTTL
	b.MetadataErrorTTL = o.metadataErrorTTL
	b.MaxBodyBytes = int64(o.maxBody)
	b.MaxInflightBytes = int64(o.maxInflight)
	b.MaxJSONDepth = o.maxDepth
	b.MaxElements = o.maxElements
	b.Passthrough = o.passthrough
	b.ShutdownTimeout = o.shutdownTimeout
	b.ModelMapFile = o.modelMap
	b.Pprof = o.pprof
	b.Logger = log
	o.ops.apply(&b)
	return b
}

func (o *bridgeOptions) validate() error {
	return o.check(o.options(nil))
}

// check validates a command's bridge options as its flags set them: a
// problem is a usage error naming the flag.
func (o *bridgeOptions) check(b bridge.Options) error {
	if err := o.log.validate(); err != nil {
		return err
	}
	if err := flagError(b.Validate()); err != nil {
		return err
	}
	return checkModelMap(o.modelMap)
}

// flagNames maps bridge.Options fields to the flags that set them, so that
// a validation error names what the user typed.
var flagNames = map[string]string{
	"BackendTimeout":          "backend-timeout",
	"BodyTimeout":             "body-timeout",
	"MetadataTTL":             "metadata-ttl",
	"MetadataErrorTTL":        "metadata-error-ttl",
	"MaxBodyBytes":            "max-body-bytes",
	"MaxInflightBytes":        "max-inflight-bytes",
	"GRPCMaxRecvBytes":        "grpc-max-recv-bytes",
	"MaxJSONDepth":            "max-json-depth",
	"MaxElements":             "max-elements",
	"ShutdownTimeout":         "shutdown-timeout",
	"DrainDelay":              "drain-delay",
	"DrainEnvoyAdmin":         "drain-envoy",
	"Readiness":               "readiness",
	"Proxy.RequestTimeout":    "request-timeout",
	"Proxy.ReadTimeout":       "read-timeout",
	"Proxy.ReadHeaderTimeout": "read-header-timeout",
	"Proxy.IdleTimeout":       "idle-timeout",
	"Proxy.WriteTimeout":      "write-timeout",
}

// flagError rewrites a *bridge.FieldError in terms of its flag.
func flagError(err error) error {
	var fe *bridge.FieldError
	if errors.As(err, &fe) {
		if name, ok := flagNames[fe.Field]; ok {
			return fmt.Errorf("--%s %s", name, fe.Problem)
		}
	}
	return err
}

// buildBridge assembles the bridge from the options a command's flags
// set, logging to stderr as its log flags say.
func buildBridge(lo logOptions, stderr io.Writer, options func(*slog.Logger) bridge.Options) (*bridge.Bridge, error) {
	log, err := lo.logger(stderr)
	if err != nil {
		return nil, err
	}
	b, err := bridge.New(options(log))
	if err == nil {
		log.Info("tfsbridge memory bounds", "max_inflight_bytes", b.Session.Admission.Limit(), "go_memory_limit", admission.MemoryLimit())
	}
	return b, flagError(err)
}
