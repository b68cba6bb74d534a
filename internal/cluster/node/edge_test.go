package node

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/base/httpcache"
)

// edgeOrigin is a test origin that counts the requests it sees and keeps
// the last one.
type edgeOrigin struct {
	*httptest.Server
	n    atomic.Int64
	mu   sync.Mutex
	last *http.Request
	body string
}

func newEdgeOrigin(t *testing.T, h http.HandlerFunc) *edgeOrigin {
	t.Helper()
	o := &edgeOrigin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		o.n.Add(1)
		o.mu.Lock()
		o.last, o.body = r.Clone(context.Background()), string(b)
		o.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		h(w, r)
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *edgeOrigin) lastReq() (*http.Request, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last, o.body
}

// startEdge runs a cache-mode node in front of origin and returns its
// address.
func startEdge(t *testing.T, origin string) (*Server, string) {
	t.Helper()
	up, err := ParseOrigins([]string{origin})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Edge: EdgeConfig{Upstream: up}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s, ln.Addr().String()
}

func edgeGet(t *testing.T, addr, path string, hdr ...string) (*http.Response, string) {
	t.Helper()
	return edgeDo(t, "GET", addr, path, "", hdr...)
}

func edgeDo(t *testing.T, method, addr, path, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestEdgeMissThenHit(t *testing.T) {
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "max-age=600")
		h.Set("ETag", `"v1"`)
		h.Add("Set-Cookie", "a=1")
		h.Add("Set-Cookie", "b=2")
		h.Set("X-Custom", "kept")
		h.Set("Connection", "X-Hop")
		h.Set("X-Hop", "dropped")
		fmt.Fprint(w, "hello")
	})
	srv, addr := startEdge(t, o.URL)
	resp, body := edgeGet(t, addr, "/a?q=1")
	if body != "hello" || resp.Header.Get("X-Cache") != "MISS" {
		t.Fatalf("first: %q X-Cache %q", body, resp.Header.Get("X-Cache"))
	}
	if got := resp.Header.Get("Cache-Status"); got != "shoal; fwd=uri-miss; fwd-status=200; stored" {
		t.Errorf("first Cache-Status %q", got)
	}
	if len(resp.Header.Values("Set-Cookie")) != 2 || resp.Header.Get("X-Custom") != "kept" || resp.Header.Get("X-Hop") != "" {
		t.Errorf("first headers: %v", resp.Header)
	}
	if resp.Header.Get("Via") != "1.1 shoal" {
		t.Errorf("Via %q", resp.Header.Get("Via"))
	}
	resp, body = edgeGet(t, addr, "/a?q=1")
	if body != "hello" || resp.Header.Get("X-Cache") != "HIT" || o.n.Load() != 1 {
		t.Fatalf("second: %q X-Cache %q, origin saw %d", body, resp.Header.Get("X-Cache"), o.n.Load())
	}
	if resp.Header.Get("Age") == "" || !strings.HasPrefix(resp.Header.Get("Cache-Status"), "shoal; hit; ttl=") {
		t.Errorf("hit: Age %q Cache-Status %q", resp.Header.Get("Age"), resp.Header.Get("Cache-Status"))
	}
	if len(resp.Header.Values("Set-Cookie")) != 2 || resp.Header.Get("Etag") != `"v1"` || resp.Header.Get("X-Hop") != "" {
		t.Errorf("hit headers: %v", resp.Header)
	}
	// Another query is another resource.
	if resp, _ = edgeGet(t, addr, "/a?q=2"); resp.Header.Get("X-Cache") != "MISS" || o.n.Load() != 2 {
		t.Errorf("other query: %q, origin saw %d", resp.Header.Get("X-Cache"), o.n.Load())
	}
	// The status reports the stored responses as the node's objects (the
	// second miss is committed once its body is in, maybe after the
	// answer, and counted stored after that).
	st := srv.Status()
	for i := 0; i < 250 && (st.CacheObjects < 2 || st.Edge == nil || st.Edge.Stored < 2); i++ {
		time.Sleep(20 * time.Millisecond)
		st = srv.Status()
	}
	if st.Edge == nil || st.Edge.Stored != 2 || st.CacheObjects != 2 || st.CacheHits != 1 {
		t.Errorf("status: edge %+v, %d objects, %d hits", st.Edge, st.CacheObjects, st.CacheHits)
	}
}

func TestEdgeForwardsRequests(t *testing.T) {
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.RequestURI())
	})
	_, addr := startEdge(t, o.URL)
	for _, m := range []string{"GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "M-SEARCH"} {
		resp, body := edgeDo(t, m, addr, "/p/q?x=1&y=%20", "payload-"+m,
			"Host", "site.example", "X-Client", "c", "Connection", "X-Drop", "X-Drop", "1", "Authorization", "Bearer t")
		if resp.StatusCode != http.StatusTeapot || body != m+" /p/q?x=1&y=%20" {
			t.Errorf("%s: %d %q", m, resp.StatusCode, body)
		}
		r, got := o.lastReq()
		if r.Host != "site.example" || r.Header.Get("X-Client") != "c" || r.Header.Get("X-Drop") != "" ||
			r.Header.Get("Authorization") != "Bearer t" || !strings.Contains(r.Header.Get("Via"), "1.1 shoal") {
			t.Errorf("%s at the origin: host %q headers %v", m, r.Host, r.Header)
		}
		if m != "GET" && got != "payload-"+m {
			t.Errorf("%s body at the origin %q", m, got)
		}
	}
}

// TestEdgeRequestBodies sends bodies by Content-Length and chunked, each
// followed by a pipelined request on the same connection.
func TestEdgeRequestBodies(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{}
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.Method] = string(b)
		mu.Unlock()
		fmt.Fprintf(w, "%s", r.Method)
	})
	_, addr := startEdge(t, o.URL)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"+
		"PUT /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"+
		"GET /c HTTP/1.1\r\nHost: h\r\nCache-Control: no-store\r\n\r\n")
	br := bufio.NewReader(conn)
	for _, m := range []string{"POST", "PUT", "GET"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != m {
			t.Errorf("response %q, want %q", b, m)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for m, want := range map[string]string{"POST": "hello", "PUT": "abcde", "GET": ""} {
		if got[m] != want {
			t.Errorf("%s body at the origin %q, want %q", m, got[m], want)
		}
	}
}

func TestEdgeUpstreamDown(t *testing.T) {
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {})
	url := o.URL
	o.Close()
	_, addr := startEdge(t, url)
	resp, body := edgeGet(t, addr, "/x")
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d", resp.StatusCode)
	}
	host := strings.TrimPrefix(url, "http://")
	if strings.Contains(body, host) || strings.Contains(body, "127.0.0.1") || len(body) > 40 {
		t.Errorf("502 body leaks or rambles: %q", body)
	}
}

func TestEdgeStatusesPassAndStore(t *testing.T) {
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/404":
			w.Header().Set("Cache-Control", "max-age=60")
			w.WriteHeader(404)
		case "/500":
			w.WriteHeader(500)
		case "/301":
			w.Header().Set("Location", "/elsewhere")
			w.Header().Set("Cache-Control", "max-age=60")
			w.WriteHeader(301)
		}
		fmt.Fprint(w, r.URL.Path)
	})
	_, addr := startEdge(t, o.URL)
	for _, p := range []struct {
		path   string
		status int
		second string
	}{{"/404", 404, "HIT"}, {"/500", 500, "MISS"}, {"/301", 301, "HIT"}} {
		resp, body := edgeGet(t, addr, p.path)
		if resp.StatusCode != p.status || body != p.path {
			t.Errorf("%s: %d %q", p.path, resp.StatusCode, body)
		}
		resp, _ = edgeGet(t, addr, p.path)
		if resp.StatusCode != p.status || resp.Header.Get("X-Cache") != p.second {
			t.Errorf("%s again: %d %s, want %s", p.path, resp.StatusCode, resp.Header.Get("X-Cache"), p.second)
		}
	}
}

// TestEdgeCollapse sends concurrent misses for one key: the origin sees
// one request and every client gets the body.
func TestEdgeCollapse(t *testing.T) {
	release := make(chan struct{})
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Header().Set("Cache-Control", "max-age=600")
		fmt.Fprint(w, "once")
	})
	s, addr := startEdge(t, o.URL)
	const n = 8
	var wg sync.WaitGroup
	bodies := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, bodies[i] = edgeGet(t, addr, "/slow")
		}()
	}
	// Wait until the followers are parked on the flight (counted), then
	// let the origin answer.
	for s.EdgeStats().Collapsed < n-1 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i, b := range bodies {
		if b != "once" {
			t.Errorf("client %d got %q", i, b)
		}
	}
	if got := o.n.Load(); got != 1 {
		t.Errorf("origin saw %d requests, want 1", got)
	}
}

// TestEdgeFetchOutlivesClient: the client that caused a fetch leaves before
// the body arrives; the fetch still completes and the next client hits.
func TestEdgeFetchOutlivesClient(t *testing.T) {
	release := make(chan struct{})
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=600")
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "01234")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "56789")
	})
	s, addr := startEdge(t, o.URL)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(conn, "GET /big HTTP/1.1\r\nHost: h\r\n\r\n")
	br := bufio.NewReader(conn)
	if _, err := http.ReadResponse(br, nil); err != nil {
		t.Fatal(err)
	}
	conn.Close() // gone before the rest of the body
	close(release)
	for s.EdgeStats().Stored < 1 {
		time.Sleep(time.Millisecond)
	}
	resp, body := edgeGet(t, addr, "/big", "Host", "h")
	if body != "0123456789" || resp.Header.Get("X-Cache") != "HIT" || o.n.Load() != 1 {
		t.Errorf("after the client left: %q %s, origin saw %d", body, resp.Header.Get("X-Cache"), o.n.Load())
	}
}

func TestEdgeInvalidation(t *testing.T) {
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			w.Header().Set("Location", "/other")
			w.WriteHeader(201)
			return
		}
		w.Header().Set("Cache-Control", "max-age=600")
		fmt.Fprint(w, r.URL.Path)
	})
	_, addr := startEdge(t, o.URL)
	for _, p := range []string{"/a", "/other", "/third"} {
		edgeGet(t, addr, p)
	}
	if resp, _ := edgeDo(t, "POST", addr, "/a", "x"); resp.StatusCode != 201 {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	for p, want := range map[string]string{"/a": "MISS", "/other": "MISS", "/third": "HIT"} {
		if resp, _ := edgeGet(t, addr, p); resp.Header.Get("X-Cache") != want {
			t.Errorf("%s after POST: %s, want %s", p, resp.Header.Get("X-Cache"), want)
		}
	}
}

func TestEdgeVary(t *testing.T) {
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=600")
		w.Header().Set("Vary", "Accept-Language")
		fmt.Fprint(w, "lang="+r.Header.Get("Accept-Language"))
	})
	_, addr := startEdge(t, o.URL)
	steps := []struct{ lang, xcache, body string }{
		{"en", "MISS", "lang=en"}, {"fr", "MISS", "lang=fr"}, {"en", "HIT", "lang=en"}, {"fr", "HIT", "lang=fr"}, {"", "MISS", "lang="},
	}
	for i, st := range steps {
		var hdr []string
		if st.lang != "" {
			hdr = []string{"Accept-Language", st.lang}
		}
		resp, body := edgeGet(t, addr, "/v", hdr...)
		if body != st.body || resp.Header.Get("X-Cache") != st.xcache {
			t.Errorf("step %d (%q): %q %s, want %q %s", i, st.lang, body, resp.Header.Get("X-Cache"), st.body, st.xcache)
		}
	}
}

// TestEdgeRevalidate: a response stored with no-cache is revalidated on
// every use; a 304 updates its stored header.
func TestEdgeRevalidate(t *testing.T) {
	var gen atomic.Int64
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("ETag", `"e"`)
		w.Header().Set("X-Gen", fmt.Sprint(gen.Add(1)))
		if r.Header.Get("If-None-Match") == `"e"` {
			w.WriteHeader(304)
			return
		}
		fmt.Fprint(w, "body")
	})
	_, addr := startEdge(t, o.URL)
	edgeGet(t, addr, "/r")
	resp, body := edgeGet(t, addr, "/r")
	if body != "body" || resp.Header.Get("X-Cache") != "REVALIDATED" || resp.Header.Get("X-Gen") != "2" {
		t.Fatalf("revalidated: %q %s X-Gen %s", body, resp.Header.Get("X-Cache"), resp.Header.Get("X-Gen"))
	}
	if cs := resp.Header.Get("Cache-Status"); !strings.Contains(cs, "fwd-status=304") {
		t.Errorf("Cache-Status %q", cs)
	}
	r, _ := o.lastReq()
	if r.Header.Get("If-None-Match") != `"e"` {
		t.Errorf("revalidation sent If-None-Match %q", r.Header.Get("If-None-Match"))
	}
}

// TestEdgeFromStored answers conditional and range requests from a stored
// complete response.
func TestEdgeFromStored(t *testing.T) {
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=600")
		w.Header().Set("ETag", `"abc"`)
		fmt.Fprint(w, "0123456789")
	})
	_, addr := startEdge(t, o.URL)
	edgeGet(t, addr, "/f")
	resp, body := edgeGet(t, addr, "/f", "Range", "bytes=2-4")
	if resp.StatusCode != 206 || body != "234" || resp.Header.Get("Content-Range") != "bytes 2-4/10" {
		t.Errorf("range: %d %q %q", resp.StatusCode, body, resp.Header.Get("Content-Range"))
	}
	resp, _ = edgeGet(t, addr, "/f", "If-None-Match", `"abc"`)
	if resp.StatusCode != 304 || resp.Header.Get("Etag") != `"abc"` {
		t.Errorf("conditional: %d ETag %q", resp.StatusCode, resp.Header.Get("Etag"))
	}
	resp, _ = edgeGet(t, addr, "/f", "Range", "bytes=20-")
	if resp.StatusCode != 416 {
		t.Errorf("unsatisfiable range: %d", resp.StatusCode)
	}
	resp, body = edgeDo(t, "HEAD", addr, "/f", "")
	if resp.StatusCode != 200 || body != "" || resp.ContentLength != 10 || resp.Header.Get("X-Cache") != "HIT" {
		t.Errorf("HEAD: %d %q length %d %s", resp.StatusCode, body, resp.ContentLength, resp.Header.Get("X-Cache"))
	}
	if o.n.Load() != 1 {
		t.Errorf("origin saw %d requests", o.n.Load())
	}
}

// TestEdgeInternalPaths: the node's own /.shoal/ space is answered by the
// node, never forwarded to the origin.
func TestEdgeInternalPaths(t *testing.T) {
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "origin") })
	_, addr := startEdge(t, o.URL)
	for path, want := range map[string]int{"/.shoal/status": 200, "/.shoal/sizes": 200, "/.shoal/other": 404} {
		resp, body := edgeGet(t, addr, path)
		if resp.StatusCode != want || body == "origin" {
			t.Errorf("%s: %d %q", path, resp.StatusCode, body)
		}
	}
	resp, body := edgeGet(t, addr, "/.shoal/status")
	if !strings.Contains(body, `"edge":{"hits":`) || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("status without edge counters: %s", body)
	}
	if n := o.n.Load(); n != 0 {
		t.Errorf("origin asked %d times", n)
	}
}

// TestDecodedCache: a hit on unchanged metadata reuses the decoded entry;
// new metadata bytes (a 304 rewrote them) are decoded again.
func TestDecodedCache(t *testing.T) {
	st := httpcache.NewStored(httpcache.DefaultConfig(), 200, http.Header{"Cache-Control": {"max-age=60"}}, time.Now(), time.Now())
	meta := encodeEntry(st)
	var d decodedCache
	a, err := d.get("k", meta)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := d.get("k", meta); b != a {
		t.Error("same metadata decoded twice")
	}
	if c, _ := d.get("k", bytes.Clone(meta)); c != a {
		t.Error("the same metadata in other memory decoded again")
	}
	st2 := httpcache.NewStored(httpcache.DefaultConfig(), 200, http.Header{"Cache-Control": {"max-age=70"}}, st.RequestTime, st.ResponseTime)
	if c, _ := d.get("k", encodeEntry(st2)); c == a || c.Fresh.Lifetime != 70 {
		t.Error("new metadata served from the old decoding")
	}
	if _, err := d.get("k", []byte("junk")); err == nil {
		t.Error("junk metadata decoded")
	}
	// The store reuses memory (an arena block freed and given to the next
	// entry of the key): new bytes written where the decoded ones were
	// must be decoded again, not matched against themselves.
	st3 := httpcache.NewStored(httpcache.DefaultConfig(), 200, http.Header{"Cache-Control": {"max-age=61"}}, st.RequestTime, st.ResponseTime)
	buf, next := encodeEntry(st), encodeEntry(st3)
	if len(buf) != len(next) {
		t.Fatalf("encodings of %d and %d bytes", len(buf), len(next))
	}
	a, _ = d.get("k", buf)
	copy(buf, next)
	if c, _ := d.get("k", buf); c == a || c.Fresh.Lifetime != 61 {
		t.Errorf("metadata rewritten in place served from the old decoding (lifetime %v)", c.Fresh.Lifetime)
	}
	de, _ := d.find("k")
	if !sameMeta(de.meta, next) || sameMeta(de.meta, encodeEntry(st)) {
		t.Error("sameMeta does not compare the bytes")
	}
}

// TestEdgeCDNHooks: the walk, purges and hit reports the CDN tier drives.
func TestEdgeCDNHooks(t *testing.T) {
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=600")
		if r.URL.Path == "/tagged" {
			w.Header().Set("Surrogate-Key", "red  blue")
		}
		fmt.Fprint(w, r.URL.Path)
	})
	up, _ := ParseOrigins([]string{o.URL})
	var hits sync.Map
	s, err := New(Config{Edge: EdgeConfig{Upstream: up, OnHit: func(k string) { hits.Store(k, true) }},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go s.Serve(ln)
	defer s.Shutdown(context.Background())
	addr := ln.Addr().String()
	for _, p := range []string{"/tagged", "/plain", "/tagged"} {
		edgeGet(t, addr, p, "Host", "h")
	}
	tagged, plain := s.EdgeKey("h", "/tagged"), s.EdgeKey("h", "/plain")
	if _, ok := hits.Load(tagged); !ok {
		t.Errorf("no hit reported for %q", tagged)
	}
	seen := map[string][]string{}
	s.EdgeWalk(func(e EdgeEntry) bool { seen[e.Key] = e.Tags; return true })
	if len(seen) != 2 || strings.Join(seen[tagged], ",") != "red,blue" || len(seen[plain]) != 0 {
		t.Fatalf("walk: %q", seen)
	}
	if !s.EdgeMarkStale(tagged) || !s.EdgeHas(tagged) {
		t.Fatal("soft purge failed")
	}
	if resp, _ := edgeGet(t, addr, "/tagged", "Host", "h"); resp.Header.Get("X-Cache") == "HIT" || o.n.Load() != 3 {
		t.Errorf("after a soft purge: %s, origin asked %d times", resp.Header.Get("X-Cache"), o.n.Load())
	}
	if !s.EdgeRemove(plain) || s.EdgeHas(plain) {
		t.Fatal("hard purge failed")
	}
	if resp, _ := edgeGet(t, addr, "/plain", "Host", "h"); resp.Header.Get("X-Cache") != "MISS" {
		t.Errorf("after a hard purge: %s", resp.Header.Get("X-Cache"))
	}
}

// TestEdgeUpstreamStall: an upstream that stops sending mid-body is
// abandoned after UpstreamIdle; nothing is stored and the next request
// fetches again.
func TestEdgeUpstreamStall(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=600")
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "01234")
		w.(http.Flusher).Flush()
		<-stop
	})
	up, _ := ParseOrigins([]string{o.URL})
	s, err := New(Config{Edge: EdgeConfig{Upstream: up, UpstreamIdle: 100 * time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go s.Serve(ln)
	defer s.Shutdown(context.Background())
	for i := 1; i <= 2; i++ {
		resp, err := http.Get("http://" + ln.Addr().String() + "/stall")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || string(b) != "01234" || resp.Header.Get("X-Cache") != "MISS" {
			t.Errorf("request %d: %q %v %s, want a cut body", i, b, err, resp.Header.Get("X-Cache"))
		}
		if got := o.n.Load(); got != int64(i) {
			t.Errorf("request %d: origin asked %d times", i, got)
		}
	}
}

// TestEdgeForwardsNormalisedPaths: the origin sees the path with its
// dot-segments removed (RFC 3986 §5.2.4), however they were spelled, and
// an encoded slash, which the origin might decode into segments the edge
// never saw, is refused with 400 and never forwarded.
func TestEdgeForwardsNormalisedPaths(t *testing.T) {
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprint(w, r.URL.RequestURI())
	})
	_, addr := startEdge(t, o.URL)
	for _, tt := range []struct {
		target string
		status int
		origin string // what the origin saw; "" when it must see nothing
	}{
		{"/a/./b/../c?q=1", 200, "/a/c?q=1"},
		{"/%2e%2E/%2e/x", 200, "/x"},
		{"/../../etc/passwd", 200, "/etc/passwd"},
		{"/a%2f..%2f..%2fsecret", 400, ""},
		{"/a%5c..%5csecret", 400, ""},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: site.example\r\nConnection: close\r\n\r\n", tt.target)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.target, err)
		}
		body, _ := io.ReadAll(resp.Body)
		c.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s: status %d, want %d", tt.target, resp.StatusCode, tt.status)
		}
		if tt.origin != "" && string(body) != tt.origin {
			t.Errorf("%s: origin saw %q, want %q", tt.target, body, tt.origin)
		}
		if tt.origin == "" && strings.Contains(string(body), "secret") {
			t.Errorf("%s reached the origin: %q", tt.target, body)
		}
	}
}

// A miss goes first to the other nodes: a response stored on node 0 and
// asked at node 1 comes from node 0's store over the peer link (found by
// node 0's cache digest, or named by the front's hint), named in
// Cache-Status, and the origin is not asked again; a copy node 1 cannot
// know of is fetched upstream.
func TestEdgePeerFetch(t *testing.T) {
	o := newEdgeOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=600")
		fmt.Fprint(w, "hello "+r.URL.Path)
	})
	up, err := ParseOrigins([]string{o.URL})
	if err != nil {
		t.Fatal(err)
	}
	nodes := startPeers(t, "", 2, func(i int, c *Config) {
		c.Root, c.Edge = "", EdgeConfig{Upstream: up, Name: "e1"}
	})
	a, b := nodes[0], nodes[1]
	get := func(n *testServer, path string, hdr ...string) (*http.Response, string) {
		return edgeGet(t, n.addr, path, append([]string{"Host", "site.example"}, hdr...)...)
	}
	if _, body := get(a, "/by-digest"); body != "hello /by-digest" {
		t.Fatalf("node 0: %q", body)
	}
	waitStored(t, a.srv, 1)
	a.srv.peer.DigestRound() // node 1 learns what node 0 holds now
	for _, p := range []string{"/by-hint", "/undigested"} {
		get(a, p)
	}
	waitStored(t, a.srv, 3)
	resp, body := get(b, "/by-digest")
	cs := resp.Header.Get("Cache-Status")
	if body != "hello /by-digest" || o.n.Load() != 3 || !strings.HasPrefix(cs, "e1; hit; detail=node-0, e1; fwd=uri-miss; fwd-status=200") {
		t.Fatalf("from the digest: %q, origin asked %d times, Cache-Status %q", body, o.n.Load(), cs)
	}
	if resp.Header.Get("Age") == "" {
		t.Error("a peer's copy has no Age")
	}
	resp, body = get(b, "/by-hint", FetchHeader, "0")
	if body != "hello /by-hint" || o.n.Load() != 3 || !strings.Contains(resp.Header.Get("Cache-Status"), "detail=node-0") {
		t.Fatalf("from the hint: %q, origin asked %d times, Cache-Status %q", body, o.n.Load(), resp.Header.Get("Cache-Status"))
	}
	if _, body = get(b, "/undigested"); body != "hello /undigested" || o.n.Load() != 4 {
		t.Errorf("a copy node 1 cannot know of: %q, origin asked %d times", body, o.n.Load())
	}
	if req, _ := o.lastReq(); req.Header.Get(FetchHeader) != "" {
		t.Error("the front's hint reached the origin")
	}
	// Node 1 keeps its copy: the next request is its own hit.
	if resp, _ = get(b, "/by-digest"); resp.Header.Get("X-Cache") != "HIT" {
		t.Errorf("second request at node 1: X-Cache %q", resp.Header.Get("X-Cache"))
	}
	if st := b.srv.EdgeStats(); st.PeerHits != 2 {
		t.Errorf("node 1 counted %d peer hits, want 2", st.PeerHits)
	}
}

// waitStored waits until s has stored n responses (a store commits once
// the body is in, which may follow the answer).
func waitStored(t *testing.T, s *Server, n int64) {
	t.Helper()
	for i := 0; i < 250 && s.EdgeStats().Stored < n; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if got := s.EdgeStats().Stored; got < n {
		t.Fatalf("%d responses stored, want %d", got, n)
	}
}
