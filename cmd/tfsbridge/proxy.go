package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/tfsbridge/tfsbridge/proxy/bridge"
)

const proxySummary = `Runs a standalone HTTP reverse proxy (no Envoy): TF Serving REST clients talk to it,
it talks to the v2 inference server. Of the requests that are not TF Serving REST calls,
the v2 inference endpoints are passed through untouched (--passthrough).`

// writeTimeoutUsage is --write-timeout's help, the same for the proxy and
// the ext_proc server (one environment variable serves both).
const writeTimeoutUsage = "Longest a client may take to read a translated answer, from the moment it is ready; a client that stops reading is cut and its buffer and in-flight budget freed (ext_proc: in full-duplex mode, how long Envoy may stay silent once the answer has begun; in buffered mode the budget is freed as soon as the reply is sent). Pass-through answers are not bounded."

// proxyOptions are the flags of "tfsbridge proxy".
type proxyOptions struct {
	bridgeOptions
	httpAddr          string
	requestTimeout    time.Duration
	readTimeout       time.Duration
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	writeTimeout      time.Duration
}

func (o *proxyOptions) register(fs *pflag.FlagSet) {
	d := bridge.DefaultOptions().Proxy
	fs.StringVar(&o.httpAddr, "http-addr", ":8501", "Address the HTTP proxy listens on (TF Serving's REST port is 8501).")
	fs.DurationVar(&o.requestTimeout, "request-timeout", d.RequestTimeout,
		"Deadline of a translated inference call upstream; past it the client gets 504, as from TF Serving's --rest_api_timeout_in_ms.")
	fs.DurationVar(&o.readTimeout, "read-timeout", d.ReadTimeout,
		"Longest a client may take to send a request body, from the end of its headers; a slower or unfinished body is cut (TF requests get 400, others 408) and the connection closed.")
	fs.DurationVar(&o.readHeaderTimeout, "read-header-timeout", d.ReadHeaderTimeout,
		"Longest a client may take to send a request's headers before the connection is closed.")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", d.IdleTimeout,
		"How long an idle keep-alive client connection is kept open.")
	fs.DurationVar(&o.writeTimeout, "write-timeout", d.WriteTimeout, writeTimeoutUsage)
	o.bridgeOptions.register(fs)
}

func (o *proxyOptions) validate() error { return o.check(o.options(nil)) }

// options adds the proxy's timeouts to the shared flags' options.
func (o *proxyOptions) options(log *slog.Logger) bridge.Options {
	b := o.bridgeOptions.options(log)
	b.Proxy = bridge.ProxyOptions{
		RequestTimeout:    o.requestTimeout,
		ReadTimeout:       o.readTimeout,
		ReadHeaderTimeout: o.readHeaderTimeout,
		IdleTimeout:       o.idleTimeout,
		WriteTimeout:      o.writeTimeout,
	}
	return b
}

func (o *proxyOptions) run(ctx context.Context, _, stderr io.Writer) error {
	b, err := buildBridge(o.log, stderr, o.options)
	if err != nil {
		return err
	}
	l, err := bridge.Listen(bridge.Addrs{Proxy: o.httpAddr, Admin: o.metricsAddr})
	if err != nil {
		return err
	}
	b.Log.Info("tfsbridge proxy serving", "http_addr", l.Proxy.Addr().String(), "metrics_addr", fmt.Sprint(bridge.Addr(l.Admin)),
		"backend", o.backendURL, "backend_kind", o.backendKind, "max_body_bytes", int64(o.maxBody), "passthrough", o.passthrough.String())
	return b.Serve(ctx, l)
}
