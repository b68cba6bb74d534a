package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
