package deploy

import (
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
)

// envoy-tls.yaml is envoy.yaml plus TLS (mTLS) on the ext_proc cluster:
// the TLS context is complete for tfsbridge's --tls-* flags, and nothing
// else differs, so the variant cannot drift from the checked bootstrap.
func TestEnvoyTLSVariant(t *testing.T) {
	plain, err := parseBootstrap(readFile(t, "envoy/envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	withTLS, err := parseBootstrap(readFile(t, "envoy/envoy-tls.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, c := range withTLS.GetStaticResources().GetClusters() {
		ts := c.GetTransportSocket()
		if c.GetName() != "tfsbridge_extproc" {
			if ts != nil {
				t.Errorf("cluster %s has a transport socket; only the ext_proc cluster should", c.GetName())
			}
			continue
		}
		found = true
		if ts.GetName() != "envoy.transport_sockets.tls" {
			t.Fatalf("ext_proc cluster transport socket %q, want envoy.transport_sockets.tls", ts.GetName())
		}
		up := &tlsv3.UpstreamTlsContext{}
		if err := ts.GetTypedConfig().UnmarshalTo(up); err != nil {
			t.Fatalf("ext_proc cluster TLS context: %v", err)
		}
		ctx := up.GetCommonTlsContext()
		if alpn := ctx.GetAlpnProtocols(); len(alpn) != 1 || alpn[0] != "h2" {
			t.Errorf("ALPN %v, want [h2]: gRPC needs HTTP/2", alpn)
		}
		if certs := ctx.GetTlsCertificates(); len(certs) != 1 || certs[0].GetCertificateChain().GetFilename() == "" ||
			certs[0].GetPrivateKey().GetFilename() == "" {
			t.Errorf("want one client certificate and key (mTLS with --tls-client-ca-file), got %v", certs)
		}
		vc := ctx.GetValidationContext()
		if vc.GetTrustedCa().GetFilename() == "" || len(vc.GetMatchTypedSubjectAltNames()) == 0 {
			t.Error("tfsbridge's certificate must be verified: trusted_ca and a SAN matcher")
		}
		if up.GetSni() == "" {
			t.Error("no SNI")
		}
		c.TransportSocket = nil
	}
	if !found {
		t.Fatal("envoy-tls.yaml has no tfsbridge_extproc cluster")
	}
	if !proto.Equal(plain, withTLS) {
		t.Error("envoy-tls.yaml differs from envoy.yaml beyond the ext_proc cluster's transport socket")
	}
}
