package tlsconfig

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
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

// A rotation that cannot be used keeps the pair in force, whatever is
// wrong with it, and each problem is reported once; the next good
// rotation is served.
func TestReloadRefused(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	srv := ca.Issue(t, "server", "first")
	var reports []error
	var logs strings.Builder
	kp, err := loadKeyPair(srv.CertFile, srv.KeyFile, Events{
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
		Reloaded: func(err error) { reports = append(reports, err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	kp.recheck = 0
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
	other := ca.Issue(t, "other", "other")
	expired := ca.IssueValid(t, "expired", "expired", time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	future := ca.IssueValid(t, "future", "future", time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	pemOf := func(file string) []byte {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := [2][]byte{pemOf(srv.CertFile), pemOf(srv.KeyFile)}
	for _, tc := range []struct {
		name      string
		cert, key func(path string) error
		want      string
	}{
		{"mismatched key", nil, copyOf(other.KeyFile), "private key does not match public key"},
		{"truncated PEM", writeBytes(good[0][:len(good[0])/2]), nil, "failed to find any PEM data"},
		{"missing file", os.Remove, nil, "no such file"},
		{"FIFO", func(p string) error { _ = os.Remove(p); return syscall.Mkfifo(p, 0o600) }, nil, "not a regular file"},
		{"expired", copyOf(expired.CertFile), copyOf(expired.KeyFile), "certificate not valid now: expired"},
		{"not yet valid", copyOf(future.CertFile), copyOf(future.KeyFile), "certificate not valid now: valid from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reports = nil
			for file, change := range map[string]func(string) error{srv.CertFile: tc.cert, srv.KeyFile: tc.key} {
				if change == nil {
					continue
				}
				if err := change(file); err != nil {
					t.Fatal(err)
				}
				bump(t, file)
			}
			expectCN("first")
			expectCN("first")
			if len(reports) != 1 || reports[0] == nil || !strings.Contains(reports[0].Error(), tc.want) {
				t.Errorf("reported %v, want one error containing %q", reports, tc.want)
			}
			if !strings.Contains(logs.String(), tc.want) {
				t.Errorf("log lacks %q:\n%s", tc.want, logs.String())
			}
			if err := kp.Reload(); err == nil {
				t.Error("Reload of the bad pair succeeded")
			}
			// Restore the good pair (a new stamp: it is read again).
			for i, file := range []string{srv.CertFile, srv.KeyFile} {
				_ = os.Remove(file)
				if err := os.WriteFile(file, good[i], 0o600); err != nil {
					t.Fatal(err)
				}
				bump(t, file)
			}
			expectCN("first")
		})
	}
	rotated := ca.Issue(t, "rotated", "second")
	replace(t, srv.CertFile, rotated.CertFile)
	replace(t, srv.KeyFile, rotated.KeyFile)
	reports = nil
	expectCN("second")
	if len(reports) != 1 || reports[0] != nil {
		t.Errorf("reported %v, want one success", reports)
	}
}

func copyOf(src string) func(string) error {
	return func(dst string) error {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	}
}

func writeBytes(b []byte) func(string) error {
	return func(dst string) error { return os.WriteFile(dst, b, 0o600) }
}

// An expired or not-yet-valid pair is refused at start-up too.
func TestLoadRefusesPairNotValidNow(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	for name, p := range map[string]testcerts.Pair{
		"expired":       ca.IssueValid(t, "expired", "x", time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)),
		"not yet valid": ca.IssueValid(t, "future", "x", time.Now().Add(time.Hour), time.Now().Add(48*time.Hour)),
	} {
		if _, err := LoadKeyPair(p.CertFile, p.KeyFile); !errors.Is(err, ErrNotValidNow) {
			t.Errorf("%s: %v, want ErrNotValidNow", name, err)
		}
	}
}

// HandshakeReason names what went wrong with refused handshakes.
func TestHandshakeReason(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	other := testcerts.NewCA(t, "other")
	srv := ca.Issue(t, "server", "tfsbridge")
	stranger := other.Issue(t, "stranger", "stranger")
	server, err := Server(ServerFiles{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		client func(net.Conn) // what the peer does
		want   string
	}{
		{"plaintext", func(c net.Conn) { _, _ = io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") }, ReasonNotTLS},
		{"no client certificate", tlsClient(t, ClientFiles{CAFile: ca.File}), ReasonNoClientCertificate},
		{"foreign client certificate", tlsClient(t, ClientFiles{CAFile: ca.File, CertFile: stranger.CertFile, KeyFile: stranger.KeyFile}), ReasonBadClientCert},
		{"gone", func(c net.Conn) {}, ReasonClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c1, c2 := tcpPair(t)
			go func() { tc.client(c2); _ = c2.Close() }()
			s := tls.Server(c1, server)
			err := s.Handshake()
			if err == nil {
				_, err = s.Read(make([]byte, 1)) // TLS 1.3 client auth fails here
			}
			if err == nil {
				t.Fatal("handshake succeeded")
			}
			if got := HandshakeReason(err); got != tc.want {
				t.Errorf("HandshakeReason(%v) = %s, want %s", err, got, tc.want)
			}
		})
	}
}

// tlsClient returns a peer that handshakes with f's configuration.
func tlsClient(t *testing.T, f ClientFiles) func(net.Conn) {
	cfg, err := Client(f)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = "localhost"
	return func(c net.Conn) {
		tc := tls.Client(c, cfg)
		if tc.Handshake() == nil {
			_, _ = tc.Write([]byte("x"))
			_, _ = tc.Read(make([]byte, 1))
		}
	}
}

// tcpPair returns both ends of a loopback TCP connection, closed when the
// test ends, with a generous deadline so a stuck handshake fails the test
// rather than hanging it.
func tcpPair(t *testing.T) (server, client net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close(); _ = client.Close() })
	deadline := time.Now().Add(30 * time.Second)
	_ = server.SetDeadline(deadline)
	_ = client.SetDeadline(deadline)
	return server, client
}
