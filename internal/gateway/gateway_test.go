package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/admin"
	"shoal/internal/cluster/front"
	"shoal/internal/config"
)

// TestGatewayServesAndStops starts a gateway over one plain HTTP back-end
// (health checks off, as for a node that is not shoal's) with an admin
// API, and checks that a request is relayed, that the admin API lists the
// node, that the metrics observe the front, and that Shutdown stops both.
func TestGatewayServesAndStops(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "from the node") }))
	defer backend.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fc := config.DefaultFront()
	fc.Nodes = []config.Node{{URL: backend.URL}}
	fc.Health.Interval.Duration = 0
	off := false
	fc.SysmonIdle = &off
	g, err := New(Config{Front: fc, Listener: ln, AdminListener: aln})
	if err != nil {
		t.Fatal(err)
	}
	if g.Metrics == nil || g.Admin == nil {
		t.Fatalf("with an admin listener: metrics %v, admin %v", g.Metrics, g.Admin)
	}
	if got := g.ServerConfig().MaxConn; got != fc.Limits.MaxConnPerNode {
		t.Errorf("data plane MaxConn %d, want the file's max_conn_per_node %d", got, fc.Limits.MaxConnPerNode)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	get := func(url string) string {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := get("http://" + ln.Addr().String() + "/x"); got != "from the node" {
		t.Errorf("through the front: %q", got)
	}
	if got := get("http://" + aln.Addr().String() + "/nodes"); !strings.Contains(got, backend.URL) {
		t.Errorf("admin /nodes does not list %s: %s", backend.URL, got)
	}
	if st := g.Stats(); st.Requests != 1 {
		t.Errorf("front stats: %d requests, want 1", st.Requests)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/x"); err == nil {
		t.Error("the front still answers after Shutdown")
	}
}

// TestAdminListenerBounded: the admin API closes idle keep-alive
// connections after its idle timeout, keeps at most MaxPerIP from one
// address and MaxConns in all (closing the others at once, counted in
// /metrics), so idle connections cannot hold it, or the process's
// descriptors, for as long as their clients like.
func TestAdminListenerBounded(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer backend.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	aln, _ := net.Listen("tcp", "127.0.0.1:0")
	fc := config.DefaultFront()
	fc.Nodes = []config.Node{{URL: backend.URL}}
	fc.Health.Interval.Duration = 0
	off := false
	fc.SysmonIdle = &off
	lim := admin.DefaultLimits()
	lim.MaxConns, lim.MaxPerIP, lim.IdleTimeout = 6, 4, 300*time.Millisecond
	g, err := New(Config{Front: fc, Listener: ln, AdminListener: aln, AdminLimits: lim})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown(context.Background())
	base := aln.Addr().String()
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", base)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	read := func(c net.Conn) (*http.Response, error) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET /nodes HTTP/1.1\r\nHost: localhost\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
		}
		return resp, err
	}
	var idle []net.Conn
	for range 4 {
		c := dial("127.0.0.1")
		if resp, err := read(c); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /nodes: %v %v", resp, err)
		}
		idle = append(idle, c)
	}
	if _, err := read(dial("127.0.0.1")); err == nil {
		t.Error("a fifth connection from one address was served (MaxPerIP 4)")
	}
	if resp, err := read(dial("127.0.0.2")); err != nil || resp.StatusCode != 200 {
		t.Errorf("another address: %v %v", resp, err)
	}
	for _, c := range idle {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Fatalf("an idle keep-alive connection stayed open past the idle timeout (%v)", err)
		}
	}
	resp, err := read(dial("127.0.0.1")) // the slots are free again
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the idle ones closed: %v %v", resp, err)
	}
	c := dial("127.0.0.1")
	io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "shoal_admin_connections_refused_total 1") {
		t.Errorf("refusal not counted in /metrics")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestCertExpiryInMetrics: with HTTPS, /metrics reports each
// certificate's seconds left, so an alert can fire weeks ahead of expiry.
func TestCertExpiryInMetrics(t *testing.T) {
	dir := t.TempDir()
	f := front.CertFiles{Cert: filepath.Join(dir, "c.pem"), Key: filepath.Join(dir, "k.pem")}
	if err := front.WriteSelfSigned(f.Cert, f.Key, front.SelfSigned{Valid: 10 * 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	certs, err := front.LoadCerts([]front.CertFiles{f})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	aln, _ := net.Listen("tcp", "127.0.0.1:0")
	fc := config.DefaultFront()
	fc.Nodes = []config.Node{{URL: "http://127.0.0.1:1"}}
	fc.Health.Interval.Duration = 0
	off := false
	fc.SysmonIdle = &off
	var logs strings.Builder
	g, err := New(Config{Front: fc, Listener: ln, AdminListener: aln, Certs: certs, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown(context.Background())
	resp, err := http.Get("http://" + aln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var left float64
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, `shoal_tls_certificate_expiry_seconds{cert="`+f.Cert+`"} `) {
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &left)
		}
	}
	if left < 9*86400 || left > 10*86400 {
		t.Errorf("expiry seconds %v, want about 10 days", left)
	}
	if !strings.Contains(logs.String(), "TLS certificate expires soon") {
		t.Errorf("no warning logged for a certificate with 10 days left:\n%s", logs.String())
	}
}
