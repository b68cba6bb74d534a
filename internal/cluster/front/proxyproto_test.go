package front

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// proxyV2 builds a v2 header: command (0 LOCAL, 1 PROXY) and, for PROXY, the
// source and destination of an IPv4 or IPv6 TCP connection, plus tlv bytes.
func proxyV2(cmd byte, src, dst netip.AddrPort, tlv []byte) []byte {
	b := append([]byte(nil), proxyV2Sig...)
	var addrs []byte
	fam := byte(0x00)
	if cmd == 1 {
		if src.Addr().Is4() {
			fam = 0x11
			s4, d4 := src.Addr().As4(), dst.Addr().As4()
			addrs = append(append(addrs, s4[:]...), d4[:]...)
		} else {
			fam = 0x21
			s16, d16 := src.Addr().As16(), dst.Addr().As16()
			addrs = append(append(addrs, s16[:]...), d16[:]...)
		}
		addrs = binary.BigEndian.AppendUint16(addrs, src.Port())
		addrs = binary.BigEndian.AppendUint16(addrs, dst.Port())
	}
	addrs = append(addrs, tlv...)
	b = append(b, 0x20|cmd, fam)
	b = binary.BigEndian.AppendUint16(b, uint16(len(addrs)))
	return append(b, addrs...)
}

// TestParseProxy checks both versions against hand-made headers: the
// address carried, the length taken, partial headers and malformed ones.
func TestParseProxy(t *testing.T) {
	src := netip.MustParseAddrPort("203.0.113.7:41000")
	dst := netip.MustParseAddrPort("198.51.100.1:443")
	src6 := netip.MustParseAddrPort("[2001:db8::7]:41000")
	dst6 := netip.MustParseAddrPort("[2001:db8::1]:443")
	v2 := proxyV2(1, src, dst, nil)
	v2tlv := proxyV2(1, src6, dst6, []byte{0x04, 0x00, 0x02, 'h', 'i'})
	cases := []struct {
		name string
		in   string
		n    int
		src  string // "" for no address
		err  error
	}{
		{"v1 tcp4", "PROXY TCP4 203.0.113.7 198.51.100.1 41000 443\r\nGET", 47, "203.0.113.7:41000", nil},
		{"v1 tcp6", "PROXY TCP6 2001:db8::7 2001:db8::1 41000 443\r\n", 46, "[2001:db8::7]:41000", nil},
		{"v1 unknown", "PROXY UNKNOWN\r\nGET", 15, "", nil},
		{"v1 partial", "PROXY TCP4 203.0.113.7 19", 0, "", errProxyMore},
		{"v1 signature only", "PROX", 0, "", errProxyMore},
		{"v1 family mismatch", "PROXY TCP4 2001:db8::7 2001:db8::1 1 2\r\n", 0, "", errProxyInvalid},
		{"v1 bad port", "PROXY TCP4 203.0.113.7 198.51.100.1 041000 443\r\n", 0, "", errProxyInvalid},
		{"v1 port too large", "PROXY TCP4 203.0.113.7 198.51.100.1 65536 443\r\n", 0, "", errProxyInvalid},
		{"v1 missing field", "PROXY TCP4 203.0.113.7 198.51.100.1 41000\r\n", 0, "", errProxyInvalid},
		{"v1 bare LF", "PROXY TCP4 203.0.113.7 198.51.100.1 41000 443\n", 0, "", errProxyInvalid},
		{"v1 overlong", "PROXY " + strings.Repeat("x", 120), 0, "", errProxyInvalid},
		{"v2 tcp4", string(v2) + "GET", 28, "203.0.113.7:41000", nil},
		{"v2 tcp6 with TLV", string(v2tlv), 16 + 36 + 5, "[2001:db8::7]:41000", nil},
		{"v2 local", string(proxyV2(0, src, dst, nil)), 16, "", nil},
		{"v2 partial", string(v2[:20]), 0, "", errProxyMore},
		{"v2 signature only", string(v2[:10]), 0, "", errProxyMore},
		{"v2 version 1", string(append(append([]byte{}, v2[:12]...), append([]byte{0x11}, v2[13:]...)...)), 0, "", errProxyInvalid},
		{"v2 short address", string(append(append([]byte{}, v2[:14]...), 0, 4, 1, 2, 3, 4)), 0, "", errProxyInvalid},
		{"not a header", "GET / HTTP/1.1\r\n\r\n", 0, "", errProxyInvalid},
	}
	for _, c := range cases {
		n, got, err := parseProxy([]byte(c.in))
		want := ""
		if got.IsValid() {
			want = got.String()
		}
		if err != c.err || n != c.n || want != c.src {
			t.Errorf("%s: got (%d, %q, %v), want (%d, %q, %v)", c.name, n, want, err, c.n, c.src, c.err)
		}
	}
}

// TestProxyTrusted sends a v2 header from a trusted address, over plain TCP
// and over TLS: the node sees the carried address in X-Forwarded-For and
// the access log names it as the client.
func TestProxyTrusted(t *testing.T) {
	a := namedBackend(t, "a")
	var logBuf syncBuffer
	al := NewAccessLog(&logBuf, LogJSON)
	cfg := Config{ProxyFrom: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, AccessLog: al}
	addr, s, _ := startFront(t, cfg, a.URL)
	src := netip.MustParseAddrPort("203.0.113.7:41000")
	hdr := proxyV2(1, src, netip.MustParseAddrPort("198.51.100.1:80"), nil)

	cl := dialFront(t, addr)
	cl.c.Write(append(hdr, get("/plain")...))
	resp, body := cl.read("GET")
	if resp.StatusCode != 200 || body != "a /plain" || resp.Header.Get("X-Seen-X-Forwarded-For") != "203.0.113.7" {
		t.Fatalf("plain: %d %q, node saw X-Forwarded-For %q", resp.StatusCode, body, resp.Header.Get("X-Seen-X-Forwarded-For"))
	}

	taddr, _ := h2Front(t, cfg, a.URL)
	c, err := net.Dial("tcp", taddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(hdr)
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(tc, "GET /tls HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	out, _ := io.ReadAll(io.LimitReader(tc, 4096))
	if !bytes.Contains(out, []byte("a /tls")) || !bytes.Contains(out, []byte("X-Seen-X-Forwarded-For: 203.0.113.7")) {
		t.Fatalf("TLS: got %q", out)
	}
	al.Flush()
	line := strings.SplitN(logBuf.String(), "\n", 2)[0]
	var rec struct{ Client string }
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Client != "203.0.113.7" {
		t.Errorf("access log client %q (%v) in %s", rec.Client, err, line)
	}
	if st := s.Stats().Protocols; st.ProxyAccepted != 1 {
		t.Errorf("ProxyAccepted %d, want 1", st.ProxyAccepted)
	}
}

// TestProxyRefused checks the two refusals: a PROXY v2 header from an
// address outside ProxyFrom closes the connection unanswered (over plain
// TCP and TLS), and a trusted address that sends none is closed too.
func TestProxyRefused(t *testing.T) {
	a := namedBackend(t, "a")
	hdr := proxyV2(1, netip.MustParseAddrPort("203.0.113.7:41000"), netip.MustParseAddrPort("198.51.100.1:80"), nil)
	untrusted := Config{ProxyFrom: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	addr, s, _ := startFront(t, untrusted, a.URL)
	cl := dialFront(t, addr)
	cl.c.Write(append(hdr, get("/")...))
	if got, _ := io.ReadAll(cl.br); len(got) != 0 {
		t.Errorf("untrusted PROXY header answered %q, want a silent close", got)
	}
	taddr, ts := h2Front(t, untrusted, a.URL)
	c, err := net.Dial("tcp", taddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write(hdr)
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true})
	if err := tc.Handshake(); err == nil {
		t.Error("TLS handshake after an untrusted PROXY header succeeded")
	}
	// The server counts after its handshake fails, which may be just after
	// the client's does.
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := s.Stats().Protocols.ProxyUntrusted + ts.Stats().Protocols.ProxyUntrusted
		if n == 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("ProxyUntrusted %d, want 2", n)
		}
	}

	trusted := Config{ProxyFrom: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	addr2, s2, _ := startFront(t, trusted, a.URL)
	cl2 := dialFront(t, addr2)
	cl2.c.Write([]byte(get("/")))
	if got, _ := io.ReadAll(cl2.br); len(got) != 0 {
		t.Errorf("trusted source without a PROXY header answered %q, want a close", got)
	}
	if n := s2.Stats().Protocols.ProxyRefused; n != 1 {
		t.Errorf("ProxyRefused %d, want 1", n)
	}
}

// syncBuffer is a bytes.Buffer safe for the access log's flusher and the
// test reading it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
