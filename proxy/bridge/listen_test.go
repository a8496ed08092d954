package bridge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestSplitAddr(t *testing.T) {
	for _, tc := range []struct {
		addr, network, address, err string
	}{
		{addr: ":9002", network: "tcp", address: ":9002"},
		{addr: "127.0.0.1:0", network: "tcp", address: "127.0.0.1:0"},
		{addr: "unix:///run/tfsbridge/extproc.sock", network: "unix", address: "/run/tfsbridge/extproc.sock"},
		{addr: "unix:extproc.sock", network: "unix", address: "extproc.sock"},
		{addr: "unix:/abs.sock", network: "unix", address: "/abs.sock"},
		{addr: "unix:", err: "empty socket path"},
		{addr: "unix://", err: "want unix:///absolute/path"},
		{addr: "unix://host/x.sock", err: "want unix:///absolute/path"},
	} {
		network, address, err := SplitAddr(tc.addr)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("SplitAddr(%q) error = %v, want %q", tc.addr, err, tc.err)
			}
			continue
		}
		if err != nil || network != tc.network || address != tc.address {
			t.Errorf("SplitAddr(%q) = %q, %q, %v; want %q, %q", tc.addr, network, address, err, tc.network, tc.address)
		}
	}
}

// TestListenUnix serves the ext_proc server on a Unix domain socket, as
// the Envoy sidecar example does, and asks it for its health through
// gRPC's own unix:// target; a socket left by a crashed run is replaced,
// any other file at the path is left alone.
func TestListenUnix(t *testing.T) {
	dir, err := os.MkdirTemp("", "tfsb") // short: a socket path is limited to ~108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "extproc.sock")

	// A stale socket: bound, then closed without unlinking.
	stale, err := listen("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := stale.(interface{ SetUnlinkOnClose(bool) }); ok {
		u.SetUnlinkOnClose(false)
	}
	_ = stale.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("stale socket gone: %v", err)
	}

	l, err := Listen(Addrs{Extproc: "unix://" + sock})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != socketMode {
		t.Errorf("socket mode = %v, %v; want %v", fi.Mode().Perm(), err, os.FileMode(socketMode))
	}
	o := DefaultOptions()
	o.BackendURL = "http://127.0.0.1:1"
	o.BackendKind = "triton"
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, l) }()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health over the socket = %v, %v", resp, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind after Serve: %v", err)
	}

	// Not a socket: refused, and kept.
	if err := os.WriteFile(sock, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(Addrs{Extproc: "unix://" + sock}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen over a regular file = %v", err)
	}
	if b, err := os.ReadFile(sock); err != nil || string(b) != "data" {
		t.Errorf("regular file after Listen = %q, %v", b, err)
	}
}
