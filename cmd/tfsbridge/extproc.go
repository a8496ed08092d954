package main

import (
	"context"
	"io"
	"slices"

	"github.com/tfsbridge/tfsbridge/proxy/bridge"
)

const extprocSummary = `Runs the Envoy ext_proc gRPC service: TF Serving REST requests arriving at Envoy are
translated to the v2 inference server behind it, and its answers back. Configure the
Envoy filter with headers SEND and either bodies BUFFERED with allow_mode_override: true,
or bodies FULL_DUPLEX_STREAMED with trailers SEND (see --body-mode).`

// extprocOptions are the flags of "tfsbridge extproc".
type extprocOptions struct {
	servingConfig
}

func newExtprocOptions() *extprocOptions {
	return &extprocOptions{newServingConfig(bridge.Addrs{Extproc: ":9002", Admin: bridge.DefaultMetricsAddr})}
}

func (o *extprocOptions) bindings() []binding {
	b := &o.bridge
	return slices.Concat([]binding{
		addrFlag(&o.addrs.Extproc, "grpc-addr", "Address the ext_proc gRPC server listens on: host:port, or unix:///path/to.sock (also unix:relative.sock) for a Unix domain socket, as an Envoy sidecar sharing a volume uses (cluster endpoint pipe). A socket left by a crashed run is replaced; any other file at the path is an error. The socket is created mode 0666: put it in a directory only Envoy and tfsbridge reach (an emptyDir).", true, false),
		sizeFlag(&b.GRPCMaxRecvBytes, "grpc-max-recv-bytes", "gRPC MaxRecvMsgSize of the ext_proc server, a `size`; 0 sets none of ours (Envoy's buffer limit bounds the one message a buffered body travels in, and a body over --max-body-bytes then gets TF's 413, not Envoy's bare 500). Set it (at least Envoy's buffer limit + 1MiB, never below --max-body-bytes) only when peers other than Envoy reach the port."),
		textFlag(&b.BodyMode, "body-mode", "Body mode of Envoy's ext_proc filter: auto (follow what Envoy announces on each stream, buffered when it announces nothing), buffered (BUFFERED: whole bodies, Envoy's buffer limit applies) or full-duplex (FULL_DUPLEX_STREAMED: bodies streamed both ways, no Envoy buffer limit; requires trailer modes SEND). An explicit mode Envoy contradicts answers 500 with the reason.").
			completes("auto", "buffered", "full-duplex"),
		durationFlag(&b.Proxy.WriteTimeout, "write-timeout", writeTimeoutUsage),
		durationFlag(&b.BodyTimeout, "body-timeout", "In full-duplex mode, how long a request body may take to arrive after its headers (Envoy applies no message timeout there); past it the client gets TF's 400 (Timed out reading the request body)."),
	}, backendBindings(b), tfGRPCBindings(&o.servingConfig, false), servingBindings(&o.servingConfig), serverTLSBindings(&b.TLS.Extproc))
}

func (o *extprocOptions) run(ctx context.Context, _, stderr io.Writer) error {
	b, err := buildBridge(&o.servingConfig, stderr)
	if err != nil {
		return err
	}
	l, err := bridge.Listen(bridge.Addrs{Extproc: o.addrs.Extproc, Admin: o.addrs.Admin})
	if err != nil {
		return err
	}
	c := o.bridge
	b.Log.Info("tfsbridge extproc serving", append(listenAttrs(l),
		"backend", c.BackendURL, "backend_kind", c.BackendKind, "max_body_bytes", c.MaxBodyBytes, "body_mode", c.BodyMode.String(), "passthrough", c.Passthrough.String(),
		"tls", c.TLS.Extproc.CertFile != "", "mtls", c.TLS.Extproc.ClientCAFile != "", "readiness", c.Readiness, b.ModelMapAttr())...)
	return b.Serve(ctx, l)
}
