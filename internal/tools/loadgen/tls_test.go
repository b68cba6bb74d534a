package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestHTTPS: an https URL is loaded over TLS, keep-alive and one
// connection per request; a self-signed certificate is refused unless
// Insecure, with an error that says so.
func TestHTTPS(t *testing.T) {
	var tlsReqs atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && r.ProtoMajor == 1 {
			tlsReqs.Add(1)
		}
		w.Write([]byte("hello"))
	}))
	srv.EnableHTTP2 = true // the client's ALPN must still pick http/1.1
	srv.StartTLS()
	defer srv.Close()

	res := run(t, Config{URL: srv.URL + "/x", Requests: 20, Connections: 2, Insecure: true})
	// Two connections at most; one when its worker took all 20 requests
	// before the other one's first (a loaded machine).
	if res.Requests != 20 || res.OK != 20 || res.BodyBytes != 100 || res.Connects < 1 || res.Connects > 2 {
		t.Errorf("keep-alive: requests %d ok %d body %d connects %d, want 20 20 100 and 1 or 2", res.Requests, res.OK, res.BodyBytes, res.Connects)
	}
	res = run(t, Config{URL: srv.URL + "/x", Requests: 10, DisableKeepAlive: true, Insecure: true})
	if res.Requests != 10 || res.OK != 10 || res.Connects != 10 {
		t.Errorf("new connections: requests %d ok %d connects %d, want 10 10 10", res.Requests, res.OK, res.Connects)
	}
	if n := tlsReqs.Load(); n != 30 {
		t.Errorf("server saw %d TLS http/1.1 requests, want 30", n)
	}

	r, err := New(Config{URL: srv.URL + "/x", Requests: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Probe(context.Background()); err == nil || !strings.Contains(err.Error(), "--insecure") {
		t.Errorf("probe of a self-signed server without Insecure: %v, want an error naming --insecure", err)
	}
	if r, err := New(Config{URL: "https://example.com/"}); err != nil || r.addr != "example.com:443" {
		t.Errorf("https default port: %v %q", err, r.addr)
	}
}
