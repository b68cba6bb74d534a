package front

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"shoal/internal/cluster/control"
)

// h2Front starts a front over urls serving TLS with ALPN h2 and returns
// its address and server.
func h2Front(t *testing.T, cfg Config, urls ...string) (string, *Server) {
	t.Helper()
	certs, err := LoadCerts([]CertFiles{selfSigned(t, t.TempDir(), "h2", "localhost", "127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	specs := make([]control.NodeSpec, len(urls))
	for i, u := range urls {
		specs[i] = control.NodeSpec{URL: u}
	}
	cl, err := control.New(&rrPolicy{}, specs, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := New(cl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveFront(t, s2, TLSListener(ln, certs, ALPN(cfg)...))
	return ln.Addr().String(), s2
}

// h2Client is an HTTP/2-only client: over TLS (any certificate) or, with
// h2c, over plain TCP with prior knowledge.
func h2Client(h2c bool) *http.Client {
	tr := &http2.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	if h2c {
		tr.AllowHTTP = true
		tr.DialTLSContext = func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// TestH2RoutesEachStream checks that HTTP/2 is negotiated by ALPN and that
// the streams of one connection are routed one by one: round robin over
// two nodes alternates within the connection, bodies and the node's view
// of the request (X-Forwarded-For, Host) are right, and the counters say
// HTTP/2.
func TestH2RoutesEachStream(t *testing.T) {
	a, b := namedBackend(t, "a"), namedBackend(t, "b")
	addr, s := h2Front(t, Config{}, a.URL, b.URL)
	c := h2Client(false)
	seen := map[string]int{}
	for i := 0; i < 6; i++ {
		resp, err := c.Get(fmt.Sprintf("https://%s/p%d", addr, i))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("proto %s, want HTTP/2", resp.Proto)
		}
		name := resp.Header.Get("X-Backend")
		if want := fmt.Sprintf("%s /p%d", name, i); string(body) != want {
			t.Errorf("body %q, want %q", body, want)
		}
		if xff := resp.Header.Get("X-Seen-X-Forwarded-For"); xff != "127.0.0.1" {
			t.Errorf("node saw X-Forwarded-For %q", xff)
		}
		seen[name]++
	}
	if seen["a"] != 3 || seen["b"] != 3 {
		t.Errorf("nodes %v, want 3 each (round robin per stream)", seen)
	}
	st := s.Stats()
	if st.Protocols.H2Requests != 6 || st.Protocols.H2Conns != 1 || st.Protocols.H1Requests != 0 {
		t.Errorf("protocol stats %+v, want 6 HTTP/2 requests on 1 connection", st.Protocols)
	}
}

// TestH2Concurrent sends many streams at once on one connection, with
// request bodies of known and unknown length and responses larger than
// the flow-control windows.
func TestH2Concurrent(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	node := reqBackendHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/big":
			io.WriteString(w, big)
		case "/chunked":
			w.Write([]byte("part1-"))
			w.(http.Flusher).Flush()
			w.Write([]byte("part2"))
		default:
			fmt.Fprintf(w, "%s %s %d %s", r.Method, r.URL.Path, len(body), strings.Join(r.TransferEncoding, ","))
		}
	})
	addr, _ := h2Front(t, Config{}, node)
	c := h2Client(false)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- h2Exchange(c, addr, i, big)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// h2Exchange makes request i of TestH2Concurrent and checks its answer.
func h2Exchange(c *http.Client, addr string, i int, big string) error {
	base := "https://" + addr
	var req *http.Request
	want := ""
	switch i % 4 {
	case 0:
		req, _ = http.NewRequest("GET", base+"/big", nil)
		want = big
	case 1:
		req, _ = http.NewRequest("POST", base+"/post", strings.NewReader(strings.Repeat("x", 100000)))
		want = "POST /post 100000 "
	case 2:
		// No length: the front sends the node a chunked body.
		req, _ = http.NewRequest("PUT", base+"/put", io.MultiReader(strings.NewReader("abc"), strings.NewReader("def")))
		req.ContentLength = -1
		want = "PUT /put 6 chunked"
	case 3:
		req, _ = http.NewRequest("GET", base+"/chunked", nil)
		want = "part1-part2"
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("request %d: %w", i, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("request %d: body: %w", i, err)
	}
	if string(body) != want {
		return fmt.Errorf("request %d: body of %d bytes %.40q, want %d bytes %.40q", i, len(body), body, len(want), want)
	}
	return nil
}

// reqBackendHTTP is an httptest node with handler h; it returns its URL.
func reqBackendHTTP(t *testing.T, h http.HandlerFunc) string {
	ts := namedBackend(t, "unused")
	ts.Config.Handler = h
	return ts.URL
}

// TestH2C checks HTTP/2 with prior knowledge on a plain listener that asks
// for it, and that a plain listener without H2C answers the preface as the
// malformed HTTP/1.1 request it is.
func TestH2C(t *testing.T) {
	a := namedBackend(t, "a")
	addr, s, _ := startFront(t, Config{H2C: true}, a.URL)
	resp, err := h2Client(true).Get("http://" + addr + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || string(body) != "a /x" {
		t.Fatalf("%s %q, want HTTP/2 and \"a /x\"", resp.Proto, body)
	}
	if st := s.Stats(); st.Protocols.H2Requests != 1 {
		t.Errorf("H2Requests %d, want 1", st.Protocols.H2Requests)
	}
	addr2, _, _ := startFront(t, Config{}, a.URL)
	cl := dialFront(t, addr2)
	io.WriteString(cl.c, h2Preface)
	got, _ := io.ReadAll(cl.br)
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 ")) || !bytes.Contains(got[:12], []byte(" 505")) && !bytes.Contains(got[:12], []byte(" 400")) {
		t.Errorf("without H2C the preface got %.60q, want a 400 or 505", got)
	}
}
