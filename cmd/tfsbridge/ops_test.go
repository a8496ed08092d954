package main

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/bridge"
)

func TestOpsFlags(t *testing.T) {
	// The files must exist: a wrong path is a usage error.
	t.Chdir(t.TempDir())
	for _, f := range []string{"c.pem", "k.pem", "ca.pem", "v2ca.pem", "bc.pem", "bk.pem"} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o, err := parseExtproc([]string{"--readiness=backend", "--tls-cert-file=c.pem", "--tls-key-file=k.pem",
		"--tls-client-ca-file=ca.pem", "--backend-ca-file=v2ca.pem"},
		envOf(map[string]string{"TFSBRIDGE_DRAIN_DELAY": "0s", "TFSBRIDGE_BACKEND_CERT_FILE": "bc.pem", "TFSBRIDGE_BACKEND_KEY_FILE": "bk.pem"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b := o.options(nil)
	if b.Readiness != bridge.ReadinessBackend || b.DrainDelay != 0 {
		t.Errorf("readiness %q, drain delay %v", b.Readiness, b.DrainDelay)
	}
	if x := b.TLS.Extproc; x.CertFile != "c.pem" || x.KeyFile != "k.pem" || x.ClientCAFile != "ca.pem" {
		t.Errorf("ext_proc TLS = %+v", x)
	}
	if x := b.TLS.Backend; x.CAFile != "v2ca.pem" || x.CertFile != "bc.pem" || x.KeyFile != "bk.pem" {
		t.Errorf("backend TLS = %+v", x)
	}

	d, err := parseExtproc(nil, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if b := d.options(nil); b.Readiness != "tfsbridge" || b.DrainDelay != 5*time.Second || b.TLS != (bridge.TLSOptions{}) {
		t.Errorf("defaults: readiness %q, drain delay %v, TLS %+v", b.Readiness, b.DrainDelay, b.TLS)
	}

	for args, want := range map[string]string{
		"--readiness=model":         `invalid argument "model" for "--readiness" flag: want tfsbridge or backend`,
		"--drain-delay=-1s":         "--drain-delay must not be negative",
		"--tls-cert-file=c.pem":     "--tls-key-file must be set with the certificate file",
		"--backend-key-file=bk.pem": "--backend-cert-file must be set with the key file",
	} {
		_, err := parseExtproc([]string{args}, envOf(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", args, err, want)
		}
	}
}

// The demo binds loopback only and does not wait for a load balancer.
func TestDemoDefaults(t *testing.T) {
	o, err := parseDemo(nil, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.addrs.Extproc != "127.0.0.1:9002" || o.addrs.Admin != "127.0.0.1:9090" || o.addrs.Proxy != "127.0.0.1:8501" ||
		o.mockAddr != "127.0.0.1:8000" || o.bridge.DrainDelay != 0 {
		t.Errorf("demo defaults: grpc %q metrics %q http %q mock %q drain %v", o.addrs.Extproc, o.addrs.Admin, o.addrs.Proxy, o.mockAddr, o.bridge.DrainDelay)
	}
}
