package admin

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"shoal/internal/base/accept"
)

// Config secures the admin API (docs/security.md). The
// zero value is a read-only API for loopback clients.
type Config struct {
	// Token is the bearer token (RFC 6750) that every request changing the
	// cluster must carry, and on a public API every request. "" makes the
	// API read-only: writes are refused with 403, since no request could
	// prove it may change the cluster. Read it with LoadToken.
	Token string
	// Public says other hosts can reach the API (it is not bound to a
	// loopback address; CheckBind tells): then reads need the token too,
	// as node URLs, handoff socket paths and the policy's URL tables are
	// no business of other hosts. A request that arrives on a non-loopback
	// local address is treated as public whatever this says.
	Public bool
}

// The reasons a request is refused, in the order they are checked; each is
// a label value of shoal_admin_refused_total.
const (
	refusedOrigin      = "origin"       // Origin of another origin (a web page elsewhere)
	refusedFetchSite   = "fetch_site"   // Sec-Fetch-Site other than same-origin or none
	refusedReadOnly    = "read_only"    // a write, or a public read, with no token configured
	refusedNoToken     = "no_token"     // no bearer token where one is needed
	refusedBadToken    = "bad_token"    // a bearer token that is not the configured one
	refusedHost        = "host"         // an open read for a Host that is not localhost or an IP (DNS rebinding)
	refusedContentType = "content_type" // a write whose body is not application/json
)

var refusedReasons = []string{refusedOrigin, refusedFetchSite, refusedReadOnly, refusedNoToken, refusedBadToken, refusedHost, refusedContentType}

// refusal is a request the API will not serve: why (a refused* reason),
// the status to answer and a message saying how to do it right.
type refusal struct {
	reason string
	code   int
	msg    string
}

// check applies Config's rules to r before routing; nil lets it through.
//
// Cross-origin marks come first: a browser sends Origin with every POST,
// PUT and DELETE, and Sec-Fetch-Site with every request in current
// browsers, so a request a web page on another site (or another port of
// this host) makes is refused whatever it carries — even on loopback,
// where a developer's browser is the likeliest attacker. Then the token:
// writes, public reads, and any request that offers a token must carry
// the right one; compared in constant time over SHA-256 digests, so neither
// the token's bytes nor its length leak through timing. Open reads (no
// token, loopback) must name localhost or an IP address in Host: a DNS name
// there means a browser was pointed at this port through a name that was
// rebound to 127.0.0.1. Last, a write body must be application/json, which a
// browser never sends cross-origin without a CORS preflight this API does
// not answer (the "simple request" types text/plain, form and multipart are
// exactly the ones refused).
func (s *Server) check(r *http.Request) *refusal {
	write := r.Method != http.MethodGet && r.Method != http.MethodHead
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
		return &refusal{refusedOrigin, http.StatusForbidden,
			fmt.Sprintf("cross-origin request refused: Origin %q is not this API's origin; the admin API is not for web pages", o)}
	}
	if v := r.Header.Get("Sec-Fetch-Site"); v != "" && v != "same-origin" && v != "none" {
		return &refusal{refusedFetchSite, http.StatusForbidden,
			fmt.Sprintf("Sec-Fetch-Site %q: the admin API refuses requests a browser makes for another site", v)}
	}
	public := s.cfg.Public || !loopbackConn(r)
	offered := r.Header.Get("Authorization") != ""
	switch {
	case (write || public) && s.cfg.Token == "":
		what := "read-only"
		if !write {
			what = "closed to other hosts"
		}
		return &refusal{refusedReadOnly, http.StatusForbidden, "the admin API is " + what +
			": it has no token; fix: start it with --admin-token-file FILE (admin_token_file in the config) and send Authorization: Bearer TOKEN"}
	case write || public || (offered && s.cfg.Token != ""):
		tok, ok := bearer(r)
		if !ok {
			return &refusal{refusedNoToken, http.StatusUnauthorized,
				"this request needs the admin bearer token: send Authorization: Bearer TOKEN, TOKEN being the content of the --admin-token-file file"}
		}
		sum := sha256.Sum256([]byte(tok))
		if subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) != 1 {
			return &refusal{refusedBadToken, http.StatusUnauthorized, "wrong bearer token"}
		}
	case !loopbackHost(r.Host):
		return &refusal{refusedHost, http.StatusForbidden,
			fmt.Sprintf("Host %q is not localhost or an IP address, so this may be a web page using DNS rebinding; fix: use http://127.0.0.1:PORT or send the bearer token", r.Host)}
	}
	if write && (r.Method == http.MethodPost || r.Method == http.MethodPut || r.ContentLength != 0) {
		ct := r.Header.Get("Content-Type")
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return &refusal{refusedContentType, http.StatusUnsupportedMediaType,
				fmt.Sprintf("Content-Type %q: send the body as application/json", ct)}
		}
	}
	return nil
}

// refuse answers a refused request and counts it. A 401 carries the
// Bearer challenge of RFC 6750 §3 (with error="invalid_token" when a token
// was offered and is wrong).
func (s *Server) refuse(w http.ResponseWriter, f *refusal) {
	if s.metrics != nil {
		s.metrics.refused.WithLabelValues(f.reason).Inc()
	}
	if f.code == http.StatusUnauthorized {
		challenge := `Bearer realm="shoal admin"`
		if f.reason == refusedBadToken {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
	}
	writeErr(w, f.code, errors.New(f.msg))
}

// bearer returns the token of an "Authorization: Bearer TOKEN" header
// (the scheme is case-insensitive, RFC 9110 §11.1).
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimLeft(tok, " ")
	return tok, ok && strings.EqualFold(scheme, "Bearer") && tok != ""
}

// sameOrigin reports whether the Origin header o names the origin the
// request was sent to (RFC 6454 §7: scheme://host[:port], compared to the
// Host the request names). "null" and anything else is another origin.
func sameOrigin(o string, r *http.Request) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return r.Host != "" && strings.EqualFold(o, scheme+r.Host)
}

// loopbackConn reports whether r arrived on a loopback address or a Unix
// socket of this host; a request whose local address is unknown is not.
func loopbackConn(r *http.Request) bool {
	switch a := r.Context().Value(http.LocalAddrContextKey).(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}

// loopbackHost reports whether a Host header could only have been sent by a
// client that meant this machine, or typed an address: "localhost", an IP
// literal, or nothing. Any other name may have been rebound by its owner's
// DNS to 127.0.0.1 to let a web page read the API.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" || strings.EqualFold(host, "localhost") {
		return true
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

// LoopbackAddr reports whether the listen address addr (host:port) can be
// reached only from this host: a loopback IP or "localhost". An empty host
// (all interfaces), any other IP, and any other name (it may resolve to
// anything) are not.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// CheckBind is the start-up rule for the admin API's listen address addr:
// it reports whether the API is public (see Config.Public) and refuses a
// public API without a token, since anyone who can reach it could then
// read the cluster and nobody could be told apart from the operator.
// `shoal front` and `shoal up` call it before they listen, and
// internal/config when it checks a file.
func CheckBind(addr string, haveToken bool) (public bool, err error) {
	public = !LoopbackAddr(addr)
	if public && !haveToken {
		return true, fmt.Errorf("admin API address %q can be reached from other hosts and has no token; "+
			"fix: give --admin-token-file FILE (admin_token_file in the config), FILE holding 32 or more random characters "+
			"with mode 0600 (openssl rand -hex 32 > FILE; chmod 600 FILE), or bind the admin API to 127.0.0.1", addr)
	}
	return public, nil
}

// LoadConfig is the Config for an admin API listening on addr with the
// token in tokenFile ("" for none): it reads the token (LoadToken) and
// applies CheckBind, so a command refuses to start on a bad token file or a
// public address without one.
func LoadConfig(addr, tokenFile string) (Config, error) {
	var c Config
	if tokenFile != "" {
		var err error
		if c.Token, err = LoadToken(tokenFile); err != nil {
			return Config{}, err
		}
	}
	var err error
	c.Public, err = CheckBind(addr, c.Token != "")
	return c, err
}

// minTokenLen is the shortest token LoadToken accepts: 32 characters, 128
// bits or more as hex or base64, beyond any guessing over the network.
const minTokenLen = 32

// LoadToken reads the admin bearer token from path. Like ssh with a private
// key, it refuses a file that group or others may read or write (the fix
// is chmod 600), or that another user owns (the fix is chown); then the
// token, trimmed of surrounding white space, must be at least 32
// characters a bearer token may carry (RFC 6750 §2.1 b64token).
func LoadToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("admin token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat() // of the file opened, not of whatever the name points at now
	if err != nil {
		return "", fmt.Errorf("admin token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("admin token file %s is not a regular file; fix: write the token into a file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("admin token file %s is readable or writable by group or others (mode %04o), so the token is no secret; fix: chmod 600 %s", path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return "", fmt.Errorf("admin token file %s is owned by uid %d, who could change the token; fix: chown %d %s", path, st.Uid, os.Geteuid(), path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("admin token file %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(b))
	fix := "fix: put 32 or more random characters in it (openssl rand -hex 32 > " + path + ")"
	if tok == "" {
		return "", fmt.Errorf("admin token file %s is empty; %s", path, fix)
	}
	body := strings.TrimRight(tok, "=")
	for _, c := range body {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("-._~+/", c)) {
			return "", fmt.Errorf("admin token file %s holds the character %q, which a bearer token cannot carry (RFC 6750 §2.1: letters, digits, -._~+/ and trailing =); %s", path, c, fix)
		}
	}
	if len(tok) < minTokenLen {
		return "", fmt.Errorf("admin token file %s holds a %d-character token, want at least %d; %s", path, len(tok), minTokenLen, fix)
	}
	return tok, nil
}

// LoadOrCreateToken returns the token in path, creating the file (and its
// folder, mode 0700) first if it does not exist: 32 random bytes from
// crypto/rand, hex-encoded, in a file of mode 0600. An existing file is
// read with LoadToken's checks, so two `shoal up` sharing a folder share a
// token, and a token an operator wrote is kept.
func LoadOrCreateToken(path string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("admin token file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadToken(path)
	}
	if err != nil {
		return "", fmt.Errorf("admin token file: %w", err)
	}
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	tok := hex.EncodeToString(b[:])
	_, err = f.WriteString(tok + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("admin token file %s: %w", path, err)
	}
	return tok, nil
}

// DefaultLimits are the admin API listener's bounds (accept.Limits): 64
// connections, 16 from one address, a request head within 10 s and the
// whole request within 60 s, keep-alive connections closed after 60 s
// idle, and a client that takes no response bytes for 60 s closed. The
// API is low-rate (dashboards, scrapes, operators): these keep a flood of
// idle connections from holding descriptors the process needs, so the API
// stays reachable while clients fill the data plane, which keeps its own
// reserve of descriptors for it (front.DefaultMaxClientConns).
func DefaultLimits() accept.Limits {
	return accept.Limits{MaxConns: 64, MaxPerIP: 16, HeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		IdleTimeout: 60 * time.Second, WriteTimeout: 60 * time.Second}
}
