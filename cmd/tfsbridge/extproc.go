package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/proxy/extproc"
	"github.com/tfsbridge/tfsbridge/proxy/tlsconfig"
)

const extprocSummary = `Runs the Envoy ext_proc gRPC service: TF Serving REST requests arriving at Envoy are
translated to the v2 inference server behind it, and its answers back. Configure the
Envoy filter with headers SEND and either bodies BUFFERED with allow_mode_override: true,
or bodies FULL_DUPLEX_STREAMED with trailers SEND (see --body-mode).`

// extprocOptions are the flags of "tfsbridge extproc".
type extprocOptions struct {
	bridgeOptions
	grpcAddr    string
	grpcMaxRecv byteSize
	bodyMode    extproc.BodyMode
	bodyTimeout time.Duration
	// writeTimeout is the proxy's --write-timeout, applied to full-duplex
	// answers (extproc.Options.WriteTimeout).
	writeTimeout time.Duration
	tls          tlsconfig.ServerFiles
}

func (o *extprocOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.grpcAddr, "grpc-addr", ":9002", "Address the ext_proc gRPC server listens on: host:port, or unix:///path/to.sock for a Unix domain socket (an Envoy sidecar sharing a volume).")
	fs.Var(&o.grpcMaxRecv, "grpc-max-recv-bytes", "gRPC MaxRecvMsgSize of the ext_proc server, a `size`; 0 sets none of ours (Envoy's buffer limit bounds the one message a buffered body travels in, and a body over --max-body-bytes then gets TF's 413, not Envoy's bare 500). Set it (at least Envoy's buffer limit + 1MiB, never below --max-body-bytes) only when peers other than Envoy reach the port.")
	d := bridge.DefaultOptions()
	fs.TextVar(&o.bodyMode, "body-mode", d.BodyMode, "Body mode of Envoy's ext_proc filter: auto (follow what Envoy announces on each stream, buffered when it announces nothing), buffered (BUFFERED: whole bodies, Envoy's buffer limit applies) or full-duplex (FULL_DUPLEX_STREAMED: bodies streamed both ways, no Envoy buffer limit; requires trailer modes SEND). An explicit mode Envoy contradicts answers 500 with the reason.")
	fs.DurationVar(&o.bodyTimeout, "body-timeout", d.BodyTimeout, "In full-duplex mode, how long a request body may take to arrive after its headers (Envoy applies no message timeout there); past it the client gets 400.")
	fs.DurationVar(&o.writeTimeout, "write-timeout", d.Proxy.WriteTimeout, writeTimeoutUsage)
	o.bridgeOptions.register(fs)
	registerServerTLS(fs, &o.tls)
}

func (o *extprocOptions) validate() error {
	if _, _, err := bridge.SplitAddr(o.grpcAddr); err != nil {
		return fmt.Errorf("--grpc-addr: %w", err)
	}
	return o.check(o.options(nil))
}

// options adds the extproc-only options to the shared ones.
func (o *extprocOptions) options(log *slog.Logger) bridge.Options {
	b := o.bridgeOptions.options(log)
	b.GRPCMaxRecvBytes = int64(o.grpcMaxRecv)
	b.BodyMode, b.BodyTimeout = o.bodyMode, o.bodyTimeout
	b.Proxy.WriteTimeout = o.writeTimeout
	b.TLS.Extproc = o.tls
	return b
}

func (o *extprocOptions) run(ctx context.Context, _, stderr io.Writer) error {
	b, err := buildBridge(o.log, stderr, o.options)
	if err != nil {
		return err
	}
	l, err := bridge.Listen(bridge.Addrs{Extproc: o.grpcAddr, Admin: o.metricsAddr})
	if err != nil {
		return err
	}
	b.Log.Info("tfsbridge extproc serving", "grpc_addr", l.Extproc.Addr().String(), "metrics_addr", fmt.Sprint(bridge.Addr(l.Admin)),
		"backend", o.backendURL, "backend_kind", o.backendKind, "max_body_bytes", int64(o.maxBody), "body_mode", o.bodyMode.String(), "passthrough", o.passthrough.String(),
		"tls", o.tls.CertFile != "", "mtls", o.tls.ClientCAFile != "", "readiness", o.ops.readiness)
	return b.Serve(ctx, l)
}
