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
	"os"
	"sync"
	"time"
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

// Server returns the server configuration, or nil when no certificate is
// configured (plaintext). A client CA without a certificate is an error.
func Server(f ServerFiles) (*tls.Config, error) {
	if f.CertFile == "" && f.KeyFile == "" {
		if f.ClientCAFile != "" {
			return nil, errors.New("tls: a client CA needs a server certificate and key")
		}
		return nil, nil
	}
	kp, err := LoadKeyPair(f.CertFile, f.KeyFile)
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
	return cfg, nil
}

// Client returns the client configuration, or nil when no file is
// configured (system roots, no client certificate: Go's default).
func Client(f ClientFiles) (*tls.Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		pool, err := LoadCAPool(f.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if f.CertFile != "" || f.KeyFile != "" {
		kp, err := LoadKeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = kp.GetClientCertificate
	}
	return cfg, nil
}

// LoadCAPool reads a PEM bundle of CA certificates.
func LoadCAPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
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
// either file changes (size or modification time). A reload that fails
// (a half-written file) keeps the previous pair and is retried later.
type KeyPair struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]stamp
	checked time.Time
	recheck time.Duration
}

// stamp identifies one version of a file.
type stamp struct {
	size    int64
	modTime time.Time
}

// LoadKeyPair loads the pair; both files are required.
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("tls: a certificate needs both a certificate file and a key file")
	}
	k := &KeyPair{certFile: certFile, keyFile: keyFile, recheck: recheck}
	if err := k.load(); err != nil {
		return nil, err
	}
	k.checked = time.Now()
	return k, nil
}

// load reads both files if their stamps changed since the last load.
func (k *KeyPair) load() error {
	var st [2]stamp
	for i, name := range []string{k.certFile, k.keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		st[i] = stamp{fi.Size(), fi.ModTime()}
	}
	if k.cert != nil && st == k.stamp {
		return nil
	}
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return fmt.Errorf("tls: certificate %s, key %s: %w", k.certFile, k.keyFile, err)
	}
	k.cert, k.stamp = &c, st
	return nil
}

// Certificate returns the current pair, reloading it first when the files
// changed and it was not checked in the last second.
func (k *KeyPair) Certificate() *tls.Certificate {
	k.mu.Lock()
	defer k.mu.Unlock()
	if now := time.Now(); now.Sub(k.checked) >= k.recheck {
		k.checked = now
		_ = k.load() // on failure the previous pair stays in use
	}
	return k.cert
}

// GetCertificate is tls.Config.GetCertificate.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}

// GetClientCertificate is tls.Config.GetClientCertificate.
func (k *KeyPair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}
