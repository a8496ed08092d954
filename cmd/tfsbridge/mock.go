package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
)

const mockSummary = `Runs the built-in v2 mock inference server with sample models (half_plus_two,
simple, bytes_echo, ...), imitating Triton, KServe or MLServer, so the proxy can be
tried without a real model server.`

// mockOptions are the flags of "tfsbridge mock".
type mockOptions struct {
	log      logOptions
	httpAddr string
	tfAddr   string
	grpcAddr string
	kind     string
	perturb  map[string]float64
}

func newMockOptions() *mockOptions {
	return &mockOptions{log: defaultLog(), httpAddr: "127.0.0.1:8000", kind: "triton"}
}

func (o *mockOptions) bindings() []binding {
	return append([]binding{
		// Not the proxy's listen address: a variable of its own.
		addrFlag(&o.httpAddr, "http-addr", "Address the mock v2 server listens on (Triton's HTTP port is 8000).", false, false).commandEnv(),
		addrFlag(&o.tfAddr, "tf-addr", "Also serve TF Serving's REST API on this address (TF Serving's is 8501), through tfsbridge's own translation in front of the mock: a `kind: tfserving` server for a model map's split, without TF Serving. Empty: none.", false, true).commandEnv(),
		addrFlag(&o.grpcAddr, "grpc-addr", "Address the mock serves inference.GRPCInferenceService on (Triton's gRPC port is 8001); empty: no gRPC.", false, true).commandEnv(),
		kindFlag(&o.kind),
		perturbFlag(&o.perturb, "perturb"),
	}, o.log.bindings()...)
}

func (o *mockOptions) check() error { return nil }

// kindFlag binds --kind, which means the same on mock and demo.
func kindFlag(kind *string) binding {
	return enumFlag(kind, "kind", "Server the mock imitates: triton, kserve or mlserver.", []string{"triton", "kserve", "mlserver"}, nil)
}

func (o *mockOptions) run(ctx context.Context, _, stderr io.Writer) error {
	log, err := o.log.logger(stderr)
	if err != nil {
		return err
	}
	// A listener that fails to bind stops the one already serving.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	addr, err := startMock(ctx, g, o.httpAddr, mockv2.Options{Kind: o.kind, Logger: log, Perturb: o.perturb})
	if err != nil {
		return err
	}
	attrs := []any{"http_addr", addr.String(), "kind", o.kind, "models", strings.Join(mockv2.Models(), ",")}
	if o.tfAddr != "" {
		tf, err := startMockTF(ctx, g, o.tfAddr, addr, o.kind, "", log)
		if err != nil {
			cancel()
			return errors.Join(err, g.Wait())
		}
		attrs = append(attrs, "tf_addr", tf.String())
	}
	if o.grpcAddr != "" {
		gaddr, err := startMockGRPC(ctx, g, o.grpcAddr, mockv2.Options{Kind: o.kind, Logger: log, Perturb: o.perturb})
		if err != nil {
			cancel()
			return errors.Join(err, g.Wait())
		}
		attrs = append(attrs, "grpc_addr", gaddr.String())
	}
	log.Info("tfsbridge mock serving", attrs...)
	return g.Wait()
}

// startMock binds addr and serves the mock v2 server in g until ctx is done.
func startMock(ctx context.Context, g *errgroup.Group, addr string, opt mockv2.Options) (net.Addr, error) {
	log := opt.Logger
	srv, err := mockv2.New(opt)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mock listener: %w", err)
	}
	g.Go(func() error { return bridge.ServeHTTP(ctx, bridge.NewHTTPServer(srv, log), lis, 2*time.Second) })
	return lis.Addr(), nil
}

// perturbFlag binds --perturb MODEL=DELTA: repeatable, or comma-separated
// in one value (as its variable holds it). The model must be one the mock
// serves, the delta a finite number.
func perturbFlag(p *map[string]float64, name string) binding {
	return bind(p, name, "model=delta", "Add delta to every floating-point output of a model, as `MODEL=DELTA` (repeatable, or comma-separated: half_plus_two=0.001,simple=2), so that \"tfsbridge compare\" has a drifted model to find.",
		func(s string) (map[string]float64, error) {
			out := maps.Clone(*p)
			if out == nil {
				out = map[string]float64{}
			}
			for item := range strings.SplitSeq(s, ",") {
				name, delta, ok := strings.Cut(strings.TrimSpace(item), "=")
				d, err := strconv.ParseFloat(delta, 64)
				if !ok || err != nil || math.IsNaN(d) || math.IsInf(d, 0) {
					return nil, fmt.Errorf("want MODEL=DELTA with a finite number, such as half_plus_two=0.001")
				}
				if !slices.Contains(mockv2.Models(), name) {
					return nil, fmt.Errorf("unknown model %q: want one of %s", name, strings.Join(mockv2.Models(), ", "))
				}
				out[name] = d
			}
			return out, nil
		}, func(m map[string]float64) string {
			var parts []string
			for _, name := range slices.Sorted(maps.Keys(m)) {
				parts = append(parts, name+"="+strconv.FormatFloat(m[name], 'g', -1, 64))
			}
			return strings.Join(parts, ",")
		})
}
