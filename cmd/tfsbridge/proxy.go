package main

import (
	"context"
	"io"
	"slices"

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
	servingConfig
}

func newProxyOptions() *proxyOptions {
	return &proxyOptions{newServingConfig(bridge.Addrs{Proxy: ":8501", Admin: bridge.DefaultMetricsAddr})}
}

func (o *proxyOptions) bindings() []binding {
	p := &o.bridge.Proxy
	return slices.Concat([]binding{
		addrFlag(&o.addrs.Proxy, "http-addr", "Address the HTTP proxy listens on (TF Serving's REST port is 8501).", true, false),
		durationFlag(&p.RequestTimeout, "request-timeout", "Deadline of a translated inference call upstream; past it the client gets 504, as from TF Serving's --rest_api_timeout_in_ms. Behind Envoy the TF route's timeout plays this part."),
		durationFlag(&p.ReadTimeout, "read-timeout", "Longest a client may take to send a request body, from the end of its headers; a slower or unfinished body is cut (TF requests get 400, others 408) and the connection closed."),
		durationFlag(&p.ReadHeaderTimeout, "read-header-timeout", "Longest a client may take to send a request's headers before the connection is closed."),
		durationFlag(&p.IdleTimeout, "idle-timeout", "How long an idle keep-alive client connection is kept open."),
		durationFlag(&p.WriteTimeout, "write-timeout", writeTimeoutUsage),
	}, backendBindings(&o.bridge), tfGRPCBindings(&o.servingConfig, true), servingBindings(&o.servingConfig))
}

func (o *proxyOptions) run(ctx context.Context, _, stderr io.Writer) error {
	b, err := buildBridge(&o.servingConfig, stderr)
	if err != nil {
		return err
	}
	l, err := bridge.Listen(bridge.Addrs{Proxy: o.addrs.Proxy, Admin: o.addrs.Admin, TFGRPC: o.addrs.TFGRPC})
	if err != nil {
		return err
	}
	c := o.bridge
	b.Log.Info("tfsbridge proxy serving", append(listenAttrs(l),
		"backend", c.BackendURL, "backend_kind", c.BackendKind, "max_body_bytes", c.MaxBodyBytes, "passthrough", c.Passthrough.String(), b.ModelMapAttr())...)
	return b.Serve(ctx, l)
}
