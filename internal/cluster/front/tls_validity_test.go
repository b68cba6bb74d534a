package front

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// certValid writes a self-signed pair for name valid from notBefore to
// notAfter into dir.
func certValid(t *testing.T, dir, name string, notBefore, notAfter time.Time) CertFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{name}, NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	f := CertFiles{Cert: filepath.Join(dir, "site.crt"), Key: filepath.Join(dir, "site.key")}
	os.WriteFile(f.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(f.Key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return f
}

// TestTLSReloadRefusesInvalidDates: a renewed file that is already expired
// or not yet valid is refused with an error naming it and its dates, and
// the certificate served stays; LoadCerts refuses them too. Each
// certificate's time left is reported (Expiry) for /metrics.
func TestTLSReloadRefusesInvalidDates(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	f := certValid(t, dir, "good.example", now.Add(-time.Hour), now.Add(90*24*time.Hour))
	certs, err := LoadCerts([]CertFiles{f})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, word    string
		before, after time.Time
	}{
		{"expired.example", "expired", now.Add(-48 * time.Hour), now.Add(-24 * time.Hour)},
		{"future.example", "not valid before", now.Add(24 * time.Hour), now.Add(48 * time.Hour)},
	} {
		certValid(t, dir, tc.name, tc.before, tc.after)
		err := certs.Reload()
		if err == nil || !strings.Contains(err.Error(), tc.word) || !strings.Contains(err.Error(), f.Cert) {
			t.Errorf("reload of a %s certificate: %v, want an error naming %s and saying %q", tc.name, err, f.Cert, tc.word)
		}
		if c, _ := certs.GetCertificate(&tls.ClientHelloInfo{}); c.Leaf.DNSNames[0] != "good.example" {
			got := c.Leaf.DNSNames[0]
			t.Errorf("after refusing %s, serving %q", tc.name, got)
		}
		if _, err := LoadCerts([]CertFiles{f}); err == nil {
			t.Errorf("LoadCerts took a %s certificate", tc.name)
		}
	}
	exp := certs.Expiry(now)
	if len(exp) != 1 || exp[0].File != f.Cert || exp[0].Left < 89*24*time.Hour || exp[0].Left > 90*24*time.Hour {
		t.Errorf("Expiry = %+v, want 90 days left on %s", exp, f.Cert)
	}
}

// TestTLS12OffersAEADOnly: a TLS 1.2 client offering only CBC suites finds
// none it shares with the front; with an AEAD suite it connects. Go's
// defaults still included ECDHE-ECDSA-AES-CBC-SHA.
func TestTLS12OffersAEADOnly(t *testing.T) {
	certs, err := LoadCerts([]CertFiles{selfSigned(t, t.TempDir(), "local")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tl := TLSListener(ln, certs)
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() { c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	for _, tc := range []struct {
		suite uint16
		ok    bool
	}{
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, false},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, false},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, true},
		{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, true},
	} {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12,
			CipherSuites: []uint16{tc.suite}})
		if (err == nil) != tc.ok {
			t.Errorf("TLS 1.2 with only %s: %v, want ok=%v", tls.CipherSuiteName(tc.suite), err, tc.ok)
		}
		if err == nil {
			c.Close()
		}
	}
}
