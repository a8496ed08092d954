package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
)

const demoSummary = `Starts the mock v2 server, the HTTP proxy in front of it and the ext_proc service
(for an Envoy you run yourself) in one process, then prints ready-to-paste curl
commands. A model mid-migration is split between the mock's TF Serving face and a
second, perturbed mock, and shadowed to it. Stops cleanly on Ctrl-C or SIGTERM.`

// demoOptions are the flags of "tfsbridge demo".
type demoOptions struct {
	servingConfig
	mockAddr     string
	mockGRPCAddr string
	// mockTFAddr serves the mock's TF Serving face ("TF Serving" in the
	// demo's split); mockPerturbedAddr a second mock, perturbed (the
	// converted model).
	mockTFAddr        string
	mockPerturbedAddr string
	kind              string
}

// The demo binds loopback addresses only: it is for trying tfsbridge
// on one's own machine, not for serving others. It has no load balancer
// to drain from.
func newDemoOptions() *demoOptions {
	o := &demoOptions{
		servingConfig: newServingConfig(bridge.Addrs{Proxy: "127.0.0.1:8501", Extproc: "127.0.0.1:9002", Admin: "127.0.0.1:9090", TFGRPC: "127.0.0.1:8500"}),
		mockAddr:      "127.0.0.1:8000",
		mockGRPCAddr:  "127.0.0.1:8001",
		// Next to the ports they stand for: TF Serving's 8501 (taken by
		// the proxy) and the mock's 8000.
		mockTFAddr:        "127.0.0.1:8502",
		mockPerturbedAddr: "127.0.0.1:8002",
		kind:              "triton",
	}
	o.bridge.DrainDelay = 0
	return o
}

func (o *demoOptions) bindings() []binding {
	bs := slices.Concat([]binding{
		addrFlag(&o.mockAddr, "mock-addr", "Address of the mock v2 server.", false, false),
		addrFlag(&o.mockGRPCAddr, "mock-grpc-addr", "Address of the mock v2 server's gRPC port (inference.GRPCInferenceService).", false, false),
		addrFlag(&o.mockTFAddr, "mock-tf-addr", "Address of the mock's TF Serving REST face (as mock --tf-addr): the kind tfserving server of the demo map's split model.", false, false),
		addrFlag(&o.mockPerturbedAddr, "mock-perturbed-addr", "Address of a second mock v2 server, whose half_plus_two answers 0.001 more: the converted model of the demo map's split, shadow and compare.", false, false),
		kindFlag(&o.kind),
		addrFlag(&o.addrs.Proxy, "http-addr", "Address of the HTTP proxy.", true, false),
		addrFlag(&o.addrs.Extproc, "grpc-addr", "Address of the ext_proc gRPC server.", true, false),
		addrFlag(&o.addrs.TFGRPC, "tf-grpc-addr", "Address of the TF gRPC listener (TF Serving's port 8500) in front of the mock's gRPC port; empty turns it off.", false, true),
	}, servingBindings(&o.servingConfig)) // the backend is the demo's own mock (--mock-addr, --kind)
	// Meanings or defaults of their own: a TFSBRIDGE_HTTP_ADDR meant for
	// "proxy" must not move the demo.
	for i, b := range bs {
		switch b.name {
		case "http-addr", "grpc-addr", "metrics-addr", "drain-delay", "mock-grpc-addr", "tf-grpc-addr", "mock-tf-addr", "mock-perturbed-addr":
			bs[i] = b.commandEnv()
		}
	}
	return bs
}

func (o *demoOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	g, ctx := errgroup.WithContext(ctx)
	log, err := o.log.logger(stderr)
	if err != nil {
		return err
	}
	mockAddr, err := startMock(ctx, g, o.mockAddr, mockv2.Options{Kind: o.kind, Logger: log})
	if err != nil {
		return err
	}
	mockGRPCAddr, err := startMockGRPC(ctx, g, o.mockGRPCAddr, mockv2.Options{Kind: o.kind, Logger: log})
	if err != nil {
		return err
	}
	o.bridge.BackendURL = "http://" + mockAddr.String()
	o.bridge.BackendKind = o.kind
	o.bridge.TFGRPCBackend = mockGRPCAddr.String()
	// The migration's servers: "TF Serving" (the mock's TF face, with a
	// map of its own for the split model's name) and the converted model.
	maps, err := newDemoMaps()
	if err != nil {
		return err
	}
	defer maps.cleanup()
	faceAddr, err := startMockTF(ctx, g, o.mockTFAddr, mockAddr, o.kind, maps.face, log)
	if err != nil {
		return err
	}
	convertedAddr, err := startMock(ctx, g, o.mockPerturbedAddr, mockv2.Options{Kind: o.kind, Logger: log,
		Perturb: map[string]float64{demoPerturbModel: demoPerturbDelta}})
	if err != nil {
		return err
	}
	ownMap := o.bridge.ModelMapFile == ""
	if ownMap {
		file, err := maps.writeMain(dialable(faceAddr), dialable(convertedAddr), o.kind)
		if err != nil {
			return err
		}
		o.bridge.ModelMapFile = file
	}
	b, err := buildBridge(&o.servingConfig, stderr)
	if err != nil {
		return err
	}
	l, err := bridge.Listen(o.addrs)
	if err != nil {
		return err
	}
	// Printed before serving starts: the listeners are bound, so a curl
	// pasted at once waits in the backlog rather than failing.
	demoMapFile := ""
	if ownMap {
		demoMapFile = o.bridge.ModelMapFile
	}
	printDemo(stdout, o.kind, mockAddr, faceAddr, convertedAddr, l.Proxy.Addr(), l.Extproc.Addr(), bridge.Addr(l.Admin), demoMapFile)
	if ownMap {
		m := demoMigration{proxy: clientAddr(l.Proxy.Addr()), face: clientAddr(faceAddr), converted: clientAddr(convertedAddr)}
		if a := bridge.Addr(l.Admin); a != nil {
			m.admin = clientAddr(a)
		}
		printDemoMigration(stdout, m)
	}
	tfGRPC := demoTFGRPCAddr
	if l.TFGRPC != nil {
		tfGRPC = clientAddr(l.TFGRPC.Addr())
	}
	printDemoGRPC(stdout, o.kind, mockGRPCAddr, tfGRPC)
	fmt.Fprintf(stdout, "\nPress Ctrl-C to stop.\n")
	g.Go(func() error { return b.Serve(ctx, l) })
	return g.Wait()
}

// printDemo tells the user what runs where and what to paste.
// demoMapFile is the demo's own model map, "" when the user gave one.
func printDemo(w io.Writer, kind string, mock, face, converted, proxy, grpc, admin net.Addr, demoMapFile string) {
	p := clientAddr(proxy)
	fmt.Fprintf(w, "tfsbridge demo is running:\n")
	fmt.Fprintf(w, "  %-24s http://%s\n", "mock v2 server ("+kind+")", clientAddr(mock))
	fmt.Fprintf(w, "  %-24s http://%s\n", "mock as TF Serving", clientAddr(face))
	fmt.Fprintf(w, "  %-24s http://%s  (%s %+g)\n", "mock, perturbed", clientAddr(converted), demoPerturbModel, demoPerturbDelta)
	fmt.Fprintf(w, "  %-24s http://%s\n", "TF Serving REST proxy", p)
	fmt.Fprintf(w, "  %-24s %s\n", "Envoy ext_proc (gRPC)", clientAddr(grpc))
	if admin != nil {
		fmt.Fprintf(w, "  %-24s http://%s/metrics  /healthz  /readyz\n", "metrics and health", clientAddr(admin))
	}
	fmt.Fprintf(w, "\nTry it (the TF Serving README's example first):\n\n")
	for _, c := range []string{
		`curl -d '{"instances": [1.0, 2.0, 5.0]}' -X POST http://%s/v1/models/half_plus_two:predict`,
		`curl -d '{"inputs": {"x": [1.0, 2.0, 5.0]}}' -X POST http://%s/v1/models/half_plus_two:predict`,
		`curl http://%s/v1/models/half_plus_two`,
		`curl http://%s/v1/models/half_plus_two/metadata`,
		`curl -d '{"instances": [{"text": "hello"}]}' -X POST http://%s/v1/models/bytes_echo:predict`,
		`curl -d '{"examples": [{"x": 0}, {"x": 2}]}' -X POST http://%s/v1/models/linear_classifier:classify`,
		`curl -d '{"context": {"w": 3}, "examples": [{"x": 1}, {"x": 2}]}' -X POST http://%s/v1/models/linear_regressor:regress`,
		`curl -d '{"instances": [1.0]}' -X POST http://%s/v1/models/no_such_model:predict`,
		`curl http://%s/v2/models/half_plus_two`,
	} {
		fmt.Fprintf(w, "  "+c+"\n", p)
	}
	if demoMapFile != "" {
		printDemoMap(w, p, demoMapFile)
	}
}

// clientAddr turns a listener address into one a client can dial, as
// the TF Serving README writes it: an unspecified or IPv4 loopback host
// (":8501", "127.0.0.1:8501") becomes localhost.
func clientAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && (ip.IsUnspecified() || ip.Equal(net.IPv4(127, 0, 0, 1)))) {
		host = "localhost"
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + port
}
