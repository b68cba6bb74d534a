package front

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// selfSigned writes a self-signed pair for hosts into dir and returns it.
func selfSigned(t testing.TB, dir, name string, hosts ...string) CertFiles {
	t.Helper()
	f := CertFiles{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
	if err := WriteSelfSigned(f.Cert, f.Key, SelfSigned{Hosts: hosts}); err != nil {
		t.Fatal(err)
	}
	return f
}

// tlsListen returns a listen function for passfdClusterOn that serves TLS
// with certs.
func tlsListen(certs *Certs) func() (net.Listener, error) {
	return func() (net.Listener, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		return TLSListener(ln, certs), nil
	}
}

// curlTLS fetches urls from addr over https with one curl process (one
// keep-alive connection) and checks each body's SHA-256.
func curlTLS(t *testing.T, addr string, urls []string, sums map[string]string) {
	t.Helper()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	args := []string{"-sS", "-k", "--fail", "--max-time", "60", "--http1.1"}
	for _, u := range urls {
		args = append(args, "https://"+addr+u)
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command(curl, args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("curl: %v: %s", err, stderr.String())
	}
	b := out.Bytes()
	for i, u := range urls {
		size := sizeOf(t, u)
		if len(b) < size {
			t.Fatalf("url %d %s: %d bytes left, want %d", i, u, len(b), size)
		}
		sum := sha256.Sum256(b[:size])
		if hex.EncodeToString(sum[:]) != sums[u] {
			t.Fatalf("url %d %s: checksum mismatch", i, u)
		}
		b = b[size:]
	}
	if len(b) != 0 {
		t.Fatalf("%d extra bytes", len(b))
	}
}

// pickURLs draws n of urls, reproducibly.
func pickURLs(urls []string, n int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, 14))
	out := make([]string, n)
	for i := range out {
		out[i] = urls[rng.IntN(len(urls))]
	}
	return out
}

// TestTLSRelayCurl: curl -k through a TLS front that relays, bodies of
// 1 KB to 1 MB checked by SHA-256 over one keep-alive connection; Go's
// client sees TLS 1.3, and ALPN http/1.1 when it offers only that (one that
// offers h2 gets HTTP/2: h2_test.go).
func TestTLSRelayCurl(t *testing.T) {
	certs, err := LoadCerts([]CertFiles{selfSigned(t, t.TempDir(), "local")})
	if err != nil {
		t.Fatal(err)
	}
	addr, s, _, _, urls, sums := passfdClusterOn(t, tlsListen(certs), "urlhash", 3, Config{Path: Relay()})
	picked := pickURLs(urls, 60, 1)
	curlTLS(t, addr, picked, sums)

	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := c.ConnectionState()
	if st.Version != tls.VersionTLS13 || st.NegotiatedProtocol != "http/1.1" {
		t.Errorf("version %x, ALPN %q; want TLS 1.3 (0x304), http/1.1", st.Version, st.NegotiatedProtocol)
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", urls[0])
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != sums[urls[0]] {
		t.Errorf("%s: checksum mismatch over Go's TLS client", urls[0])
	}
	fs := s.Stats()
	if fs.Paths["relay"] != uint64(len(picked)+1) || fs.Handoff.FallbackTLS != 0 {
		t.Errorf("paths %v, fallback_tls %d; want %d relayed and no fallback (relay is not a handoff)",
			fs.Paths, fs.Handoff.FallbackTLS, len(picked)+1)
	}
}

// TestTLSPassFDFallsBackToRelay: a passfd front serving TLS relays every
// request (the TLS session cannot go with the socket) and counts each in
// FallbackTLS, not as a send failure; nothing is passed. Hybrid too.
func TestTLSPassFDFallsBackToRelay(t *testing.T) {
	certs, err := LoadCerts([]CertFiles{selfSigned(t, t.TempDir(), "local")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  func() Config
	}{
		{"passfd", func() Config { return Config{Path: PassFD(PassFDConfig{})} }},
		{"hybrid", func() Config {
			// Every object counts as large: the hybrid rule hands each request off.
			return Config{Choose: Hybrid(PassFD(PassFDConfig{})), Hybrid: HybridConfig{MinSize: 1, Size: func(string) int64 { return 1 << 20 }}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, s, _, _, urls, sums := passfdClusterOn(t, tlsListen(certs), "urlhash", 2, tc.cfg())
			picked := pickURLs(urls, 40, 2)
			curlTLS(t, addr, picked, sums)
			h := s.Stats().Handoff
			t.Logf("handoff %+v", h)
			if h.FallbackTLS != uint64(len(picked)) || h.Passed != 0 || h.FallbackSend != 0 {
				t.Errorf("fallback_tls %d, passed %d, fallback_send %d; want %d, 0, 0",
					h.FallbackTLS, h.Passed, h.FallbackSend, len(picked))
			}
		})
	}
}

// TestTLSPicksCertificateBySNI: the certificate follows the server name —
// exact names, a wildcard, and the first certificate for no name or an
// unknown one.
func TestTLSPicksCertificateBySNI(t *testing.T) {
	dir := t.TempDir()
	certs, err := LoadCerts([]CertFiles{
		selfSigned(t, dir, "default", "localhost", "127.0.0.1"),
		selfSigned(t, dir, "a", "a.example"),
		selfSigned(t, dir, "b", "b.example", "*.b.example"),
	})
	if err != nil {
		t.Fatal(err)
	}
	addr, _, _, _, _, _ := passfdClusterOn(t, tlsListen(certs), "urlhash", 1, Config{})
	for _, tc := range []struct{ sni, want string }{
		{"a.example", "a.example"},
		{"A.Example.", "a.example"},
		{"b.example", "b.example"},
		{"www.b.example", "b.example"},
		{"x.www.b.example", "localhost"}, // a wildcard covers one label only
		{"c.example", "localhost"},
		{"", "localhost"},
	} {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, ServerName: tc.sni})
		if err != nil {
			t.Fatalf("sni %q: %v", tc.sni, err)
		}
		got := c.ConnectionState().PeerCertificates[0].DNSNames[0]
		c.Close()
		if got != tc.want {
			t.Errorf("sni %q: certificate for %q, want %q", tc.sni, got, tc.want)
		}
	}
}

// TestTLSRefusesOldVersions: a client that offers at most TLS 1.1 (or
// 1.0) fails the handshake; 1.2 works.
func TestTLSRefusesOldVersions(t *testing.T) {
	certs, err := LoadCerts([]CertFiles{selfSigned(t, t.TempDir(), "local")})
	if err != nil {
		t.Fatal(err)
	}
	addr, _, _, _, _, _ := passfdClusterOn(t, tlsListen(certs), "urlhash", 1, Config{})
	for _, tc := range []struct {
		max uint16
		ok  bool
	}{{tls.VersionTLS10, false}, {tls.VersionTLS11, false}, {tls.VersionTLS12, true}, {tls.VersionTLS13, true}} {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: tc.max})
		if (err == nil) != tc.ok {
			t.Errorf("max version %x: handshake error %v, want ok=%v", tc.max, err, tc.ok)
		}
		if err == nil {
			c.Close()
		}
	}
}

// TestTLSReload: Reload switches new handshakes to the rewritten files and
// keeps the old certificates when the new files are broken.
func TestTLSReload(t *testing.T) {
	dir := t.TempDir()
	f := selfSigned(t, dir, "site", "old.example")
	certs, err := LoadCerts([]CertFiles{f})
	if err != nil {
		t.Fatal(err)
	}
	addr, _, _, _, _, _ := passfdClusterOn(t, tlsListen(certs), "urlhash", 1, Config{})
	served := func() string {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].DNSNames[0]
	}
	if got := served(); got != "old.example" {
		t.Fatalf("served %q before reload", got)
	}
	os.Remove(f.Cert)
	os.Remove(f.Key)
	selfSigned(t, dir, "site", "new.example")
	if err := certs.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != "new.example" {
		t.Errorf("served %q after reload, want new.example", got)
	}
	if err := os.WriteFile(f.Cert, []byte("half a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := certs.Reload(); err == nil || !strings.Contains(err.Error(), f.Cert) {
		t.Errorf("reload of a broken file: %v, want an error naming %s", err, f.Cert)
	}
	if got := served(); got != "new.example" {
		t.Errorf("served %q after a failed reload, want new.example kept", got)
	}
}

// TestTLSRefusalDoesNotStallAccept: a connection refused by a limit is
// closed, not answered 503 — the 503 would need a handshake on the accept
// loop, and a client that never sends its hello would stall every accept.
func TestTLSRefusalDoesNotStallAccept(t *testing.T) {
	certs, err := LoadCerts([]CertFiles{selfSigned(t, t.TempDir(), "local")})
	if err != nil {
		t.Fatal(err)
	}
	addr, _, _, _, urls, _ := passfdClusterOn(t, tlsListen(certs), "urlhash", 1, Config{MaxConnsPerIP: 1})
	a, err := net.Dial("tcp", addr) // takes the address's one slot, says nothing
	if err != nil {
		t.Fatal(err)
	}
	b, err := net.Dial("tcp", addr) // refused
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := b.Read(make([]byte, 1)); err == nil || n != 0 {
		t.Fatalf("refused connection: read %d bytes, %v; want it closed", n, err)
	}
	a.Close()
	// The slot is free once the front sees a's end; the accept loop must
	// be free too.
	deadline := time.Now().Add(5 * time.Second)
	for {
		d := net.Dialer{Timeout: time.Second}
		c, err := tls.DialWithDialer(&d, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", urls[0])
			resp, rerr := http.ReadResponse(bufio.NewReader(c), nil)
			c.Close()
			if rerr == nil && resp.StatusCode == 200 {
				return
			}
			err = fmt.Errorf("response: %v", rerr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new TLS client never got an answer after the refusal: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWriteSelfSigned: an ECDSA P-256 certificate for localhost and
// 127.0.0.1, key mode 0600, kept on a second call, remade when the hosts
// change.
func TestWriteSelfSigned(t *testing.T) {
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "tls", "cert.pem"), filepath.Join(dir, "tls", "key.pem")
	if err := WriteSelfSigned(cf, kf, SelfSigned{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(kf)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	kp, err := tls.LoadX509KeyPair(cf, kf)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(kp.Certificate[0])
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T, want ECDSA P-256", leaf.PublicKey)
	}
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	before, _ := os.ReadFile(cf)
	if err := WriteSelfSigned(cf, kf, SelfSigned{}); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(cf); !bytes.Equal(before, again) {
		t.Error("a usable certificate was replaced")
	}
	if err := WriteSelfSigned(cf, kf, SelfSigned{Hosts: []string{"shoal.test"}}); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(cf); bytes.Equal(before, again) {
		t.Error("a certificate for other hosts was kept")
	}
}

// takeoverPath stands for any handoff path: it would take the socket.
type takeoverPath struct{ served atomic.Int64 }

func (p *takeoverPath) Name() string { return "takeover" }
func (p *takeoverPath) Serve(x *Exchange) Result {
	p.served.Add(1)
	x.Conn().Close()
	return Result{Detached: true}
}

// TestTLSNeverHandsOffASession: whatever path is configured other than
// relay and redirect (repair's case too, which needs root to build), a
// request on a TLS connection never reaches it: it is relayed and counted.
func TestTLSNeverHandsOffASession(t *testing.T) {
	certs, err := LoadCerts([]CertFiles{selfSigned(t, t.TempDir(), "local")})
	if err != nil {
		t.Fatal(err)
	}
	p := &takeoverPath{}
	addr, s, _, _, urls, sums := passfdClusterOn(t, tlsListen(certs), "urlhash", 1, Config{Path: p})
	picked := pickURLs(urls, 10, 3)
	curlTLS(t, addr, picked, sums)
	if n, h := p.served.Load(), s.Stats().Handoff; n != 0 || h.FallbackTLS != uint64(len(picked)) {
		t.Errorf("path served %d requests, fallback_tls %d; want 0 and %d", n, h.FallbackTLS, len(picked))
	}
}

// TestTLSShedClosesWithoutAlert: the idle shedder closes a TLS connection
// at once, without a close_notify alert. The alert is a write that blocks
// (up to 5 s) on a client that does not read, and the shedder runs on the
// accept loop near the connection limit, so one such client per shed would
// stall every accept.
func TestTLSShedClosesWithoutAlert(t *testing.T) {
	certs, err := LoadCerts([]CertFiles{selfSigned(t, t.TempDir(), "local")})
	if err != nil {
		t.Fatal(err)
	}
	_, s, _ := startFront(t, Config{}, "http://127.0.0.1:1")
	srvSide, cliSide := net.Pipe() // unbuffered: a write waits for the reader
	defer cliSide.Close()
	hs := make(chan error, 1)
	go func() { hs <- tls.Client(cliSide, &tls.Config{InsecureSkipVerify: true}).Handshake() }()
	tc := tls.Server(srvSide, certs.TLSConfig())
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-hs; err != nil {
		t.Fatal(err)
	}
	if s.acceptConn(tc) == nil {
		t.Fatal("connection refused")
	}
	time.Sleep(time.Duration(2 * shedMinIdle)) // idle long enough to be shed
	done := make(chan int, 1)
	go func() { done <- s.shedIdle(1) }()
	// Read what the server sends on the raw pipe: nothing but the close.
	cliSide.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := cliSide.Read(make([]byte, 64))
	if n != 0 || err != io.EOF {
		t.Errorf("the shed connection sent %d bytes (%v) before closing; want it closed without an alert", n, err)
	}
	go io.Copy(io.Discard, cliSide) // let a blocked alert write finish
	if k := <-done; k != 1 {
		t.Errorf("shed %d connections, want 1", k)
	}
}
