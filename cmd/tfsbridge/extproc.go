package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/proxy/tlsconfig"
)

const extprocSummary = `Runs the Envoy ext_proc gRPC service: TF Serving REST requests arriving at Envoy are
translated to the v2 inference server behind it, and its answers back. Configure the
Envoy filter with headers SEND, bodies BUFFERED, allow_mode_override: true.`

// extprocOptions are the flags of "tfsbridge extproc".
type extprocOptions struct {
	bridgeOptions
	grpcAddr    string
	grpcMaxRecv byteSize
	tls         tlsconfig.ServerFiles
}

func (o *extprocOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.grpcAddr, "grpc-addr", ":9002", "Address the ext_proc gRPC server listens on: host:port, or unix:///path/to.sock for a Unix domain socket (an Envoy sidecar sharing a volume).")
	fs.Var(&o.grpcMaxRecv, "grpc-max-recv-bytes", "gRPC MaxRecvMsgSize of the ext_proc server, a `size`; 0 sets none of ours (Envoy's buffer limit bounds the one message a buffered body travels in, and a body over --max-body-bytes then gets TF's 413, not Envoy's bare 500). Set it (at least Envoy's buffer limit + 1MiB, never below --max-body-bytes) only when peers other than Envoy reach the port.")
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
		"backend", o.backendURL, "backend_kind", o.backendKind, "max_body_bytes", int64(o.maxBody), "passthrough", o.passthrough.String(),
		"tls", o.tls.CertFile != "", "mtls", o.tls.ClientCAFile != "", "readiness", o.ops.readiness)
	return b.Serve(ctx, l)
}
