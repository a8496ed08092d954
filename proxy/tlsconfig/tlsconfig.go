// Package tlsconfig builds tfsbridge's TLS configurations from PEM files:
// the ext_proc server's (certificate, optional client CA for mTLS) and the
// clients' towards v2 servers (CA, optional client certificate). A
// certificate and key pair is reloaded when its files change, so that a
// rotated Kubernetes secret or cert-manager renewal takes effect without
// a restart.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/fileread"
)

// recheck is how often, at most, a KeyPair looks at its files again: a
// stat per handshake would be cheap, but not free under load.
const recheck = time.Second

// ServerFiles are the PEM files of a TLS server.
type ServerFiles struct {
	// CertFile and KeyFile are the server's certificate (chain) and key.
	CertFile, KeyFile string
	// ClientCAFile, when set, turns on mTLS: clients must present a
	// certificate signed by one of these CAs.
	ClientCAFile string
}

// ClientFiles are the PEM files of a TLS client.
type ClientFiles struct {
	// CAFile, when set, replaces the system roots for verifying the server.
	CAFile string
	// CertFile and KeyFile, when set, are the client certificate for mTLS.
	CertFile, KeyFile string
}

// Enabled reports whether any file is configured.
func (c ClientFiles) Enabled() bool { return c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" }

// maxPEMBytes bounds a certificate, key or CA bundle file: a chain of a
// few certificates is a few KiB, a system CA bundle about 200 KiB.
const maxPEMBytes = 4 << 20

// Events receive what happens to a KeyPair's files; nil fields are
// skipped.
type Events struct {
	// Logger receives one line per reload, and one per distinct problem
	// with the files (not one per check).
	Logger *slog.Logger
	// Reloaded is called once per reload of a changed pair (err nil) and
	// once per distinct problem that kept the previous pair in use.
	Reloaded func(err error)
}

func (e Events) log() *slog.Logger {
	if e.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Logger
}

// Loaded is a TLS configuration together with the key pairs it serves,
// so that they can be reloaded at once (SIGHUP) rather than at the next
// check.
type Loaded struct {
	Config *tls.Config
	pairs  []*KeyPair
}

// Pairs returns the key pairs (nil-safe).
func (l *Loaded) Pairs() []*KeyPair {
	if l == nil {
		return nil
	}
	return l.pairs
}

// Reload re-reads every pair now; a pair that fails keeps its previous
// certificate. It returns the first error.
func (l *Loaded) Reload() error {
	if l == nil {
		return nil
	}
	var first error
	for _, kp := range l.pairs {
		if err := kp.Reload(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Server returns the server configuration, or nil when no certificate is
// configured (plaintext). A client CA without a certificate is an error.
func Server(f ServerFiles) (*tls.Config, error) {
	l, err := LoadServer(f, Events{})
	if l == nil {
		return nil, err
	}
	return l.Config, err
}

// LoadServer is Server with the key pair exposed and its reloads
// reported to ev; nil when no certificate is configured.
func LoadServer(f ServerFiles, ev Events) (*Loaded, error) {
	if f.CertFile == "" && f.KeyFile == "" {
		if f.ClientCAFile != "" {
			return nil, errors.New("tls: a client CA needs a server certificate and key")
		}
		return nil, nil
	}
	kp, err := loadKeyPair(f.CertFile, f.KeyFile, ev)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: kp.GetCertificate}
	if f.ClientCAFile != "" {
		pool, err := LoadCAPool(f.ClientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return &Loaded{Config: cfg, pairs: []*KeyPair{kp}}, nil
}

// Client returns the client configuration, or nil when no file is
// configured (system roots, no client certificate: Go's default).
func Client(f ClientFiles) (*tls.Config, error) {
	l, err := LoadClient(f, Events{})
	if l == nil {
		return nil, err
	}
	return l.Config, err
}

// LoadClient is Client with the client key pair (if any) exposed and its
// reloads reported to ev; nil when no file is configured.
func LoadClient(f ClientFiles, ev Events) (*Loaded, error) {
	if !f.Enabled() {
		return nil, nil
	}
	l := &Loaded{Config: &tls.Config{MinVersion: tls.VersionTLS12}}
	if f.CAFile != "" {
		pool, err := LoadCAPool(f.CAFile)
		if err != nil {
			return nil, err
		}
		l.Config.RootCAs = pool
	}
	if f.CertFile != "" || f.KeyFile != "" {
		kp, err := loadKeyPair(f.CertFile, f.KeyFile, ev)
		if err != nil {
			return nil, err
		}
		l.Config.GetClientCertificate = kp.GetClientCertificate
		l.pairs = append(l.pairs, kp)
	}
	return l, nil
}

// LoadCAPool reads a PEM bundle of CA certificates.
func LoadCAPool(file string) (*x509.CertPool, error) {
	pem, err := fileread.Read(file, maxPEMBytes)
	if err != nil {
		return nil, fmt.Errorf("tls: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: CA file %s: no PEM certificate found", file)
	}
	return pool, nil
}

// KeyPair is a certificate and key loaded from files and reloaded when
// either file changes (size or modification time), checked at most once
// a second. A reload that fails — a half-written or mismatched file, a
// file gone or replaced by something that is not a regular file, or a
// pair that is expired or not yet valid — keeps the previous pair in use;
// the problem is logged and reported once per distinct problem.
//
// Handshakes never wait for the files: the pair in force is an atomic
// value, and one handshake at a time re-checks the files (reads that
// cannot block: fileread) while the others use the current pair.
type KeyPair struct {
	certFile, keyFile string
	ev                Events
	recheck           time.Duration
	now               func() time.Time // for tests

	cert     atomic.Pointer[tls.Certificate]
	checking atomic.Bool
	checked  atomic.Int64 // unix nanoseconds of the last check

	mu      sync.Mutex // serializes loads (check and Reload)
	stamp   [2]stamp   // of the pair in force
	bad     [2]stamp   // of files refused as broken, not read again until they change
	lastErr string     // the last problem reported, "" after a success
}

// stamp identifies one version of a file.
type stamp struct {
	size    int64
	modTime time.Time
}

// LoadKeyPair loads the pair; both files are required.
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	return loadKeyPair(certFile, keyFile, Events{})
}

func loadKeyPair(certFile, keyFile string, ev Events) (*KeyPair, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("tls: a certificate needs both a certificate file and a key file")
	}
	k := &KeyPair{certFile: certFile, keyFile: keyFile, ev: ev, recheck: recheck, now: time.Now}
	if _, err := k.load(true); err != nil {
		return nil, err
	}
	k.checked.Store(k.now().UnixNano())
	return k, nil
}

// ErrNotValidNow marks a pair whose certificate is expired or not yet
// valid: it would fail every handshake, so it is never put in use.
var ErrNotValidNow = errors.New("certificate not valid now")

// load reads both files, unless force is false and their stamps are the
// ones last seen, and puts a good pair in use. It reports whether the
// pair changed.
func (k *KeyPair) load(force bool) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var st [2]stamp
	for i, name := range []string{k.certFile, k.keyFile} {
		fi, err := fileread.Stat(name)
		if err != nil {
			return false, k.refuse(fmt.Errorf("tls: %w", err))
		}
		st[i] = stamp{fi.Size(), fi.ModTime()}
	}
	if !force && (st == k.stamp && k.lastErr == "" || st == k.bad) {
		return false, nil
	}
	c, err := k.read()
	if err != nil {
		if !errors.Is(err, ErrNotValidNow) {
			// The same broken files are not read again until they change;
			// a pair not valid yet is (its time will come).
			k.bad = st
		}
		return false, k.refuse(err)
	}
	k.stamp, k.bad = st, [2]stamp{}
	k.cert.Store(c)
	k.lastErr = ""
	return true, nil
}

// read parses the pair from the files and checks it is valid now.
func (k *KeyPair) read() (*tls.Certificate, error) {
	certPEM, err := fileread.Read(k.certFile, maxPEMBytes)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	keyPEM, err := fileread.Read(k.keyFile, maxPEMBytes)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s, key %s: %w", k.certFile, k.keyFile, err)
	}
	leaf := c.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: certificate %s: %w", k.certFile, err)
		}
	}
	now := k.now()
	switch {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("tls: certificate %s: %w: expired at %s", k.certFile, ErrNotValidNow, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, fmt.Errorf("tls: certificate %s: %w: valid from %s", k.certFile, ErrNotValidNow, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return &c, nil
}

// refuse reports a problem once (the previous pair stays in use) and
// returns it. Called with k.mu held.
func (k *KeyPair) refuse(err error) error {
	if k.cert.Load() == nil || err.Error() == k.lastErr {
		return err // at start-up the error is the caller's to report
	}
	k.lastErr = err.Error()
	k.ev.log().Warn("TLS certificate reload failed: the previous certificate stays in use",
		"cert_file", k.certFile, "key_file", k.keyFile, "error", err)
	if k.ev.Reloaded != nil {
		k.ev.Reloaded(err)
	}
	return err
}

// Reload re-reads the pair now, even if its files look unchanged.
func (k *KeyPair) Reload() error {
	changed, err := k.load(true)
	if err == nil && changed {
		k.reloaded()
	}
	return err
}

// reloaded reports a new pair in use.
func (k *KeyPair) reloaded() {
	c := k.cert.Load()
	attrs := []any{"cert_file", k.certFile}
	if c.Leaf != nil {
		attrs = append(attrs, "subject", c.Leaf.Subject.String(), "not_after", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	k.ev.log().Info("TLS certificate reloaded", attrs...)
	if k.ev.Reloaded != nil {
		k.ev.Reloaded(nil)
	}
}

// Certificate returns the current pair, reloading it first when the files
// changed and it was not checked in the last second. Only one caller at a
// time looks at the files; the others get the current pair at once.
func (k *KeyPair) Certificate() *tls.Certificate {
	now := k.now()
	if now.UnixNano()-k.checked.Load() >= int64(k.recheck) && k.checking.CompareAndSwap(false, true) {
		k.checked.Store(now.UnixNano())
		if changed, err := k.load(false); err == nil && changed {
			k.reloaded()
		}
		k.checking.Store(false)
	}
	return k.cert.Load()
}

// GetCertificate is tls.Config.GetCertificate.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}

// GetClientCertificate is tls.Config.GetClientCertificate.
func (k *KeyPair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}

// Handshake failure reasons (HandshakeReason).
const (
	ReasonNotTLS              = "not_tls"
	ReasonNoClientCertificate = "no_client_certificate"
	ReasonBadClientCert       = "bad_client_certificate"
	ReasonTimeout             = "timeout"
	ReasonClosed              = "closed"
	ReasonOther               = "other"
)

// HandshakeReason classifies a failed server handshake for metrics and
// logs: a peer speaking plaintext, a client without a certificate (mTLS)
// or with one the client CA did not sign, a peer too slow or gone.
func HandshakeReason(err error) string {
	var rh tls.RecordHeaderError
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var ci x509.CertificateInvalidError
	var ne net.Error
	msg := err.Error()
	switch {
	case errors.As(err, &rh):
		return ReasonNotTLS
	case strings.Contains(msg, "client didn't provide a certificate"):
		return ReasonNoClientCertificate
	case errors.As(err, &cv), errors.As(err, &ua), errors.As(err, &ci),
		strings.Contains(msg, "failed to verify certificate"), strings.Contains(msg, "bad certificate"):
		return ReasonBadClientCert
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, net.ErrClosed), errors.Is(err, syscall.EPIPE):
		return ReasonClosed
	}
	return ReasonOther
}
