package tlsconfig

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/internal/testcerts"
)

// handshake runs one TLS handshake between server and client configs
// over loopback TCP (an unbuffered pipe deadlocks when one side fails
// mid-flight) and returns the certificate the client saw.
func handshake(t *testing.T, server, client *tls.Config) (string, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c1, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	defer c2.Close()
	deadline := time.Now().Add(30 * time.Second)
	_ = c1.SetDeadline(deadline)
	_ = c2.SetDeadline(deadline)
	srvErr := make(chan error, 1)
	go func() {
		s := tls.Server(c1, server)
		err := s.Handshake()
		if err == nil {
			_, err = io.WriteString(s, "x") // completes TLS 1.3 client auth
		}
		srvErr <- err
		_ = s.Close()
	}()
	c := tls.Client(c2, client)
	err = c.Handshake()
	if err == nil {
		_, err = c.Read(make([]byte, 1))
	}
	state := c.ConnectionState()
	_ = c2.Close() // a server still writing to the failed client gives up
	if serr := <-srvErr; err == nil {
		err = serr
	}
	if err != nil {
		return "", err
	}
	return state.PeerCertificates[0].Subject.CommonName, nil
}

func TestServerAndClient(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	other := testcerts.NewCA(t, "other")
	srv := ca.Issue(t, "server", "tfsbridge")
	cli := ca.Issue(t, "client", "envoy")
	stranger := other.Issue(t, "stranger", "stranger")

	tests := []struct {
		name    string
		server  ServerFiles
		client  ClientFiles
		wantErr string // "" means the handshake succeeds
	}{
		{"tls", ServerFiles{CertFile: srv.CertFile, KeyFile: srv.KeyFile}, ClientFiles{CAFile: ca.File}, ""},
		{"untrusted server", ServerFiles{CertFile: srv.CertFile, KeyFile: srv.KeyFile}, ClientFiles{CAFile: other.File}, "unknown authority"},
		{"mtls", ServerFiles{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.File},
			ClientFiles{CAFile: ca.File, CertFile: cli.CertFile, KeyFile: cli.KeyFile}, ""},
		{"mtls without client cert", ServerFiles{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.File},
			ClientFiles{CAFile: ca.File}, "certificate required"},
		{"mtls with a stranger's cert", ServerFiles{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.File},
			ClientFiles{CAFile: ca.File, CertFile: stranger.CertFile, KeyFile: stranger.KeyFile}, "unknown certificate authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Server(tt.server)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Client(tt.client)
			if err != nil {
				t.Fatal(err)
			}
			c.ServerName = "localhost"
			cn, err := handshake(t, s, c)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("handshake: %v", err)
			case tt.wantErr == "" && cn != "tfsbridge":
				t.Errorf("server certificate CN = %q, want tfsbridge", cn)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("handshake error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	srv := ca.Issue(t, "server", "tfsbridge")
	notPEM := t.TempDir() + "/not.pem"
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := Server(ServerFiles{}); c != nil || err != nil {
		t.Errorf("Server(no files) = %v, %v; want plaintext", c, err)
	}
	if c, err := Client(ClientFiles{}); c != nil || err != nil {
		t.Errorf("Client(no files) = %v, %v; want Go's defaults", c, err)
	}
	for name, err := range map[string]error{
		"client CA without cert":  errOf(Server(ServerFiles{ClientCAFile: ca.File})),
		"cert without key":        errOf(Server(ServerFiles{CertFile: srv.CertFile})),
		"missing cert":            errOf(Server(ServerFiles{CertFile: "/nonexistent.pem", KeyFile: srv.KeyFile})),
		"key mismatch":            errOf(Server(ServerFiles{CertFile: srv.CertFile, KeyFile: ca.Issue(t, "x", "x").KeyFile})),
		"CA not PEM":              errOf(Client(ClientFiles{CAFile: notPEM})),
		"missing CA":              errOf(Client(ClientFiles{CAFile: "/nonexistent.pem"})),
		"client key without cert": errOf(Client(ClientFiles{KeyFile: srv.KeyFile})),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func errOf(_ *tls.Config, err error) error { return err }

// A certificate rotated on disk is served from the next check on; a
// broken rotation keeps the old one.
func TestReload(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	srv := ca.Issue(t, "server", "first")
	kp, err := LoadKeyPair(srv.CertFile, srv.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	kp.recheck = 0 // check the files at every handshake
	cfg := &tls.Config{GetCertificate: kp.GetCertificate}
	client, err := Client(ClientFiles{CAFile: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	client.ServerName = "localhost"
	expectCN := func(want string) {
		t.Helper()
		cn, err := handshake(t, cfg, client)
		if err != nil || cn != want {
			t.Fatalf("served CN = %q, %v; want %q", cn, err, want)
		}
	}
	expectCN("first")

	rotated := ca.Issue(t, "rotated", "second")
	replace(t, srv.CertFile, rotated.CertFile)
	replace(t, srv.KeyFile, rotated.KeyFile)
	expectCN("second")

	// Half-written: the previous pair stays in use.
	if err := os.WriteFile(srv.CertFile, []byte("-----BEGIN CERT"), 0o600); err != nil {
		t.Fatal(err)
	}
	bump(t, srv.CertFile)
	expectCN("second")
}

// replace copies src over dst and moves dst's mtime forward, so that the
// change is seen even on a file system with coarse timestamps.
func replace(t *testing.T, dst, src string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	bump(t, dst)
}

var bumps = time.Now()

func bump(t *testing.T, file string) {
	t.Helper()
	bumps = bumps.Add(time.Minute)
	if err := os.Chtimes(file, bumps, bumps); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}
