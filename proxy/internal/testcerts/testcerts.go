// Package testcerts makes throwaway certificates for TLS tests: a CA and
// leaf certificates it signs, written as PEM files.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority for one test.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate as a PEM file.
	File string
	dir  string
	n    int64
}

// Pair is a leaf certificate's PEM files.
type Pair struct {
	CertFile, KeyFile string
	Cert              *x509.Certificate
}

// NewCA makes a CA whose files live in t's temporary directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca := &CA{dir: t.TempDir(), n: 1}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca.Cert, _ = x509.ParseCertificate(der)
	ca.key = key
	ca.File = filepath.Join(ca.dir, name+"-ca.pem")
	WriteCert(t, ca.File, der)
	return ca
}

// Issue signs a leaf for cn, valid for 127.0.0.1 and localhost as a
// server and as a client, and writes it as name.pem and name-key.pem.
func (ca *CA) Issue(t testing.TB, name, cn string) Pair {
	t.Helper()
	return ca.IssueValid(t, name, cn, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

// IssueValid is Issue with the given validity period: for expired and
// not-yet-valid certificates.
func (ca *CA) IssueValid(t testing.TB, name, cn string, notBefore, notAfter time.Time) Pair {
	t.Helper()
	key := newKey(t)
	ca.n++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.n),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	p := Pair{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem")}
	p.Cert, _ = x509.ParseCertificate(der)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write(t, p.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	WriteCert(t, p.CertFile, der)
	return p
}

// WriteCert writes a DER certificate as a PEM file.
func WriteCert(t testing.TB, file string, der []byte) {
	t.Helper()
	write(t, file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func write(t testing.TB, file string, data []byte) {
	t.Helper()
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
