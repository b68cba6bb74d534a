package front

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// HTTPS at the front. The front terminates TLS itself: a
// listener wrapped by TLSListener hands Serve *tls.Conn connections, whose
// handshake runs on the connection's own goroutine under HeaderTimeout (the
// first read), so a slow handshake never holds the accept loop. Requests are
// then parsed and relayed exactly as over plain TCP; responses go out as TLS
// records, the head and a small body in one record (clientConn.writev).
//
// The handoff paths cannot follow: passfd, hybrid and repair move the
// client's TCP socket to a node, but the TLS session (keys, sequence
// numbers) lives in this process, and the kernel here has no kTLS to carry
// it with the socket. Over TLS every request those paths would hand off is
// relayed instead and counted in HandoffStats.FallbackTLS, and the raw accept
// path (fastaccept.go) is not used (it needs a *net.TCPListener).

// CertFiles names one certificate chain and its private key, both PEM files
// (the chain's first certificate is the server's, as nginx's
// ssl_certificate and HAProxy's crt expect).
type CertFiles struct {
	Cert, Key string
}

// Certs is the front's set of certificates, chosen per handshake by the
// client's server name (SNI, RFC 6066 §3): an exact DNS name of a
// certificate's subject alternative names wins, then a wildcard
// ("*.example.org" matches one label), then the first certificate — the
// default for clients that send no name (those that connect by IP address)
// or an unknown one, as nginx's default server does. Reload reads the files
// again while handshakes go on; one Certs serves any number of listeners.
type Certs struct {
	files []CertFiles
	cur   atomic.Pointer[certSet]
}

// CertExpiry is one certificate's time left.
type CertExpiry struct {
	// File is the certificate's file; NotAfter its end of validity; Left
	// the time from now to then.
	File     string
	NotAfter time.Time
	Left     time.Duration
}

// ExpiryWarning is how long before its end a certificate is logged as
// expiring (at load and reload); /metrics has the time left throughout.
const ExpiryWarning = 21 * 24 * time.Hour

// LogExpiring warns on log about each certificate with less than
// ExpiryWarning left at now: at start and after each reload.
func (c *Certs) LogExpiring(log *slog.Logger, now time.Time) {
	for _, e := range c.Expiry(now) {
		if e.Left < ExpiryWarning {
			log.Warn("TLS certificate expires soon: renew it and send SIGHUP", "cert", e.File,
				"not_after", e.NotAfter.UTC().Format(time.RFC3339), "days_left", int(e.Left.Hours()/24))
		}
	}
}

// Expiry returns each loaded certificate's time left at now, in the order
// given, for /metrics (shoal_tls_certificate_expiry_seconds) and the
// warning logged ahead of expiry.
func (c *Certs) Expiry(now time.Time) []CertExpiry {
	set := c.cur.Load()
	out := make([]CertExpiry, len(set.list))
	for i, cert := range set.list {
		out[i] = CertExpiry{File: c.files[i].Cert, NotAfter: cert.Leaf.NotAfter, Left: cert.Leaf.NotAfter.Sub(now)}
	}
	return out
}

// certSet is one loaded generation of certificates.
type certSet struct {
	list   []*tls.Certificate
	byName map[string]*tls.Certificate // lower-case DNS name or "*.suffix"
}

// LoadCerts reads every certificate and key in files; it fails, naming the
// file, if one is missing, unreadable, does not match its key or has no
// certificate.
func LoadCerts(files []CertFiles) (*Certs, error) {
	if len(files) == 0 {
		return nil, errors.New("tls: no certificate given")
	}
	c := &Certs{files: append([]CertFiles(nil), files...)}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload reads the certificate files again and switches to them at once
// for new handshakes; sessions already established keep theirs. On any
// error nothing changes and the error names the file, so a SIGHUP with a
// half-copied certificate leaves the front serving the old one.
//
// A certificate outside its validity dates (expired, or not valid yet) is
// refused like a broken file: every client would refuse it, and a renewal
// copied over the file before its start date, or a stale one restored,
// must not replace one that works.
func (c *Certs) Reload() error { return c.reload(time.Now()) }

func (c *Certs) reload(now time.Time) error {
	set := &certSet{byName: map[string]*tls.Certificate{}}
	for _, f := range c.files {
		kp, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return fmt.Errorf("tls: certificate %s, key %s: %w", f.Cert, f.Key, err)
		}
		leaf := kp.Leaf
		if leaf == nil {
			if leaf, err = x509.ParseCertificate(kp.Certificate[0]); err != nil {
				return fmt.Errorf("tls: certificate %s: %w", f.Cert, err)
			}
			kp.Leaf = leaf
		}
		if now.After(leaf.NotAfter) {
			return fmt.Errorf("tls: certificate %s expired on %s", f.Cert, leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		if now.Before(leaf.NotBefore) {
			return fmt.Errorf("tls: certificate %s is not valid before %s", f.Cert, leaf.NotBefore.UTC().Format(time.RFC3339))
		}
		cert := &kp
		set.list = append(set.list, cert)
		for _, name := range leaf.DNSNames {
			name = strings.ToLower(strings.TrimSuffix(name, "."))
			if _, dup := set.byName[name]; !dup { // the first file listed wins
				set.byName[name] = cert
			}
		}
	}
	c.cur.Store(set)
	return nil
}

// Names lists, per certificate in the order given, its DNS names (for the
// startup log line).
func (c *Certs) Names() [][]string {
	set := c.cur.Load()
	out := make([][]string, len(set.list))
	for i, cert := range set.list {
		out[i] = cert.Leaf.DNSNames
	}
	return out
}

// pick returns the certificate for the server name a client asked for.
func (set *certSet) pick(name string) *tls.Certificate {
	if name != "" {
		name = strings.ToLower(strings.TrimSuffix(name, "."))
		if cert := set.byName[name]; cert != nil {
			return cert
		}
		if i := strings.IndexByte(name, '.'); i > 0 {
			if cert := set.byName["*"+name[i:]]; cert != nil {
				return cert
			}
		}
	}
	return set.list[0]
}

// GetCertificate is the tls.Config hook that picks the certificate of a
// handshake by its server name.
func (c *Certs) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cur.Load().pick(hello.ServerName), nil
}

// TLSConfig returns the server configuration the front uses: TLS 1.2 and
// 1.3 only (RFC 8996 deprecates 1.0 and 1.1), for 1.2 only ECDHE key
// exchange with AEAD ciphers (aeadSuites, the Mozilla "intermediate"
// profile; 1.3 has only AEAD suites), Go's default curves (X25519
// first), session tickets on, and ALPN (RFC 7301) offering protos, by
// default h2 then http/1.1 (ALPN says which a front with a Config offers).
func (c *Certs) TLSConfig(protos ...string) *tls.Config {
	if len(protos) == 0 {
		protos = []string{"h2", "http/1.1"}
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		CipherSuites:   aeadSuites,
		NextProtos:     protos,
		GetCertificate: c.GetCertificate,
	}
}

// aeadSuites are the TLS 1.2 suites the front offers: ECDHE with AES-GCM
// or ChaCha20-Poly1305 only, Mozilla's "intermediate" list. Go's defaults
// still include the ECDHE AES-CBC-SHA suites (CBC with HMAC-SHA1,
// mac-then-encrypt, the family of Lucky13), which no client that speaks
// TLS 1.2 needs. TLS 1.3 suites are all AEAD and not configurable.
var aeadSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// TLSListener wraps ln so that Serve gets TLS connections using certs,
// offering the ALPN protocols protos (default: h2, http/1.1; pass
// ALPN(cfg) for a front's). The handshake happens on each connection's
// own goroutine.
//
// It turns Listen's TCP_DEFER_ACCEPT off again on a TCP listener: that
// option pays where accepting is most of the front's work (the handoff
// paths, which TLS cannot use), while over TLS with a new connection per
// request it cut the request rate by more than half and added second-long
// stalls (bench/tls-vs-haproxy.sh; figures in docs/benchmarks.md).
func TLSListener(ln net.Listener, certs *Certs, protos ...string) net.Listener {
	if tl, ok := ln.(*net.TCPListener); ok {
		if raw, err := tl.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) { undeferAccept(int(fd)) })
		}
	}
	return tls.NewListener(ln, certs.TLSConfig(protos...))
}

// SelfSigned describes the certificate WriteSelfSigned makes.
type SelfSigned struct {
	// Hosts are the subject alternative names: IP addresses become IP SANs,
	// the rest DNS names. Default localhost and 127.0.0.1 (and ::1).
	Hosts []string
	// Valid is how long the certificate is valid from now. Default one year.
	Valid time.Duration
}

// WriteSelfSigned makes an ECDSA P-256 key and a self-signed certificate
// for cfg.Hosts and writes them as PEM to certFile and keyFile (the key
// with mode 0600, created afresh), for `shoal up --tls`. Clients must be
// told to trust it (curl -k, shoal bench http --insecure). An existing pair
// that loads, covers every host and is valid for at least another day is
// kept, so a browser exception survives restarts.
func WriteSelfSigned(certFile, keyFile string, cfg SelfSigned) error {
	if len(cfg.Hosts) == 0 {
		cfg.Hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	if cfg.Valid <= 0 {
		cfg.Valid = 365 * 24 * time.Hour
	}
	if usableSelfSigned(certFile, keyFile, cfg.Hosts) {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("tls: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return fmt.Errorf("tls: serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"shoal self-signed"}, CommonName: cfg.Hosts[0]},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(cfg.Valid),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, h := range cfg.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("tls: certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("tls: key: %w", err)
	}
	for _, f := range []string{certFile, keyFile} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
	}
	// The key first, into a fresh file: never widen an existing file's mode.
	os.Remove(keyFile)
	kf, err := os.OpenFile(keyFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("tls: key %s: %w", keyFile, err)
	}
	if err := pem.Encode(kf, &pem.Block{Type: "PRIVATE KEY", Bytes: kder}); err != nil {
		kf.Close()
		return fmt.Errorf("tls: key %s: %w", keyFile, err)
	}
	if err := kf.Close(); err != nil {
		return fmt.Errorf("tls: key %s: %w", keyFile, err)
	}
	cpem := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, cpem, 0o644); err != nil {
		return fmt.Errorf("tls: certificate %s: %w", certFile, err)
	}
	return nil
}

// usableSelfSigned reports whether the pair at certFile/keyFile loads,
// names every host and stays valid for at least a day.
func usableSelfSigned(certFile, keyFile string, hosts []string) bool {
	kp, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil || time.Until(leaf.NotAfter) < 24*time.Hour {
		return false
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm()&0o077 != 0 {
		return false
	}
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// handshake runs the TLS handshake within HeaderTimeout and reports
// whether the client chose HTTP/2 (ALPN h2, RFC 9113 §3.2), and ok false
// when the handshake failed.
func (cc *clientConn) handshake() (h2, ok bool) {
	tc := cc.c.(*tls.Conn)
	cc.rdl.setRead(cc.c, cc.now, cc.s.cfg.HeaderTimeout)
	cc.wdl.setWrite(cc.c, cc.now, cc.s.cfg.HeaderTimeout)
	if err := tc.Handshake(); err != nil {
		var rh tls.RecordHeaderError
		if len(cc.s.cfg.ProxyFrom) > 0 && errors.As(err, &rh) && looksLikeProxy(rh.RecordHeader[:]) {
			cc.s.ctr.proxyUntrusted.Add(1) // a PROXY header from outside ProxyFrom
		}
		return false, false
	}
	return tc.ConnectionState().NegotiatedProtocol == "h2", true
}

// isTLS reports whether c is a TLS connection.
func isTLS(c net.Conn) bool {
	_, ok := c.(*tls.Conn)
	return ok
}

// tlsPath is the data path for a request on a TLS connection: relay,
// redirect and local (the node writes through the session) as chosen; any other path (passfd, hybrid's handoff, repair,
// which move the TCP socket but cannot move the TLS session without kTLS)
// becomes relay, a fallback the caller counts (HandoffStats.FallbackTLS).
func tlsPath(p DataPath) (DataPath, fallbackReason) {
	switch p.(type) {
	case relayPath, redirectPath, localPath:
		return p, fallbackNone
	}
	return relayPath{}, fallbackTLS
}

// closeTLS closes c without a word if it is a TLS connection and reports
// whether it did: a 503 on a refused connection would first need a
// handshake, which runs on the accept loop and which a client can stall.
func closeTLS(c net.Conn) bool {
	tc, ok := c.(*tls.Conn)
	if ok {
		tc.NetConn().Close()
	}
	return ok
}

// closeNow closes c at once: a TLS connection without its close_notify
// alert, a write that can block for seconds on a client that does not
// read. For closing connections in bulk (idle shedding, Close), where one
// slow client must not hold up the rest; a connection's own goroutine
// closes it normally, alert included.
func closeNow(c net.Conn) error {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.NetConn().Close()
	}
	return c.Close()
}
