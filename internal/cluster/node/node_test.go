package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/trace"
	"shoal/internal/testutil"
)

const helloBody = "hello, world\n"

// site builds a small tree: files of several sizes, a directory with
// awkward names, a directory with an index page, and a symlink that leaves
// the root. It returns the root and the secret outside it.
func site(t *testing.T) (root, secret string) {
	t.Helper()
	root = t.TempDir()
	outside := t.TempDir()
	secret = "TOP-SECRET-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	testutil.WriteTree(t, root, map[string]string{
		"hello.txt":            helloBody,
		"1k.bin":               strings.Repeat("x", 1024),
		"big.bin":              bigBody(),
		"sub/a <b>.txt":        "a",
		"sub/x&y\".html":       "<p>x</p>",
		"sub/deeper/z.txt":     "z",
		"withindex/index.html": "<h1>index</h1>",
		"leak.txt":             "->" + filepath.Join(outside, "secret.txt"),
		"leakdir":              "->" + outside,
	})
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, secret
}

// bigBody is 600 KB (above the 500 KB cache threshold) of position-dependent
// bytes, so a range can be checked against its offset.
func bigBody() string {
	var b strings.Builder
	for i := 0; b.Len() < 600<<10; i++ {
		fmt.Fprintf(&b, "%08d\n", i)
	}
	return b.String()
}

type testServer struct {
	srv  *Server
	addr string
	log  *testutil.SyncBuf
	done chan error
}

func start(t *testing.T, root string, mod func(*Config)) *testServer {
	t.Helper()
	ts := &testServer{log: &testutil.SyncBuf{}, done: make(chan error, 1)}
	cfg := Config{
		Root:      root,
		AccessLog: ts.log,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.srv, ts.addr = srv, ln.Addr().String()
	go func() { ts.done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return ts
}

// startSite starts a node with the default Config on the fixture site and
// connects a client to it: the setup most tests of this package share.
func startSite(t *testing.T) (root string, ts *testServer, c *client) {
	t.Helper()
	root, _ = site(t)
	ts = start(t, root, nil)
	return root, ts, ts.dial(t)
}

// sendRaw dials addr and writes raw on the new connection, which has a 10 s
// deadline (a safety net, not a timing); the caller closes it.
func sendRaw(t *testing.T, addr, raw string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, raw); err != nil {
		nc.Close()
		t.Fatal(err)
	}
	return nc
}

type client struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func (ts *testServer) dial(t *testing.T) *client {
	t.Helper()
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	// A safety net so a broken server fails the test instead of hanging it;
	// no assertion depends on it.
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &client{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *client) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatal(err)
	}
}

type response struct {
	status int
	h      textproto.MIMEHeader
	body   string
}

// read reads one response; head is true for a response to HEAD (no body).
func (c *client) read(head bool) response {
	c.t.Helper()
	tp := textproto.NewReader(c.r)
	line, err := tp.ReadLine()
	if err != nil {
		c.t.Fatalf("reading status line: %v", err)
	}
	f := strings.SplitN(line, " ", 3)
	if len(f) < 2 || f[0] != "HTTP/1.1" {
		c.t.Fatalf("bad status line %q", line)
	}
	st, _ := strconv.Atoi(f[1])
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		c.t.Fatalf("reading headers: %v", err)
	}
	resp := response{status: st, h: h}
	if head || st == 304 {
		return resp
	}
	n, err := strconv.Atoi(h.Get("Content-Length"))
	if err != nil {
		c.t.Fatalf("Content-Length %q", h.Get("Content-Length"))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		c.t.Fatalf("reading body: %v", err)
	}
	resp.body = string(body)
	return resp
}

// closed reports whether the server closed the connection (EOF or reset
// with nothing more to read).
func (c *client) closed() bool {
	c.t.Helper()
	b, err := c.r.ReadByte()
	if err == nil {
		c.t.Fatalf("expected close, got byte %q", b)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatal("connection still open after the safety deadline")
	}
	return true
}

func get(path string, extra ...string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: test\r\n" + strings.Join(extra, "") + "\r\n"
}

func TestGetAndHead(t *testing.T) {
	_, _, c := startSite(t)
	for i := 0; i < 2; i++ { // miss, then cache hit
		c.send(get("/hello.txt"))
		r := c.read(false)
		if r.status != 200 || r.body != helloBody {
			t.Fatalf("GET: %d %q", r.status, r.body)
		}
		if r.h.Get("Content-Type") != "text/plain; charset=utf-8" || r.h.Get("Content-Length") != "13" ||
			r.h.Get("ETag") == "" || r.h.Get("Last-Modified") == "" || r.h.Get("Date") == "" {
			t.Fatalf("headers: %v", r.h)
		}
	}
	// HEAD: same headers, no body; the next response on the same
	// connection must start right after the head.
	c.send("HEAD /hello.txt HTTP/1.1\r\nHost: test\r\n\r\n" + get("/1k.bin"))
	r := c.read(true)
	if r.status != 200 || r.h.Get("Content-Length") != "13" {
		t.Fatalf("HEAD: %d %v", r.status, r.h)
	}
	if r2 := c.read(false); r2.status != 200 || len(r2.body) != 1024 {
		t.Fatalf("after HEAD: %d len %d", r2.status, len(r2.body))
	}
	// Large file (sendfile path), HEAD and GET.
	c.send("HEAD /big.bin HTTP/1.1\r\nHost: test\r\n\r\n" + get("/big.bin"))
	if r := c.read(true); r.status != 200 || r.h.Get("Content-Length") != strconv.Itoa(len(bigBody())) {
		t.Fatalf("HEAD big: %d %v", r.status, r.h)
	}
	if r := c.read(false); r.body != bigBody() {
		t.Fatalf("GET big: body differs (len %d)", len(r.body))
	}
	c.send(get("/missing"))
	if r := c.read(false); r.status != 404 {
		t.Fatalf("missing: %d", r.status)
	}
	c.send("POST /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\n\r\nabc" + get("/hello.txt"))
	if r := c.read(false); r.status != 405 || r.h.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d %v", r.status, r.h)
	}
	if r := c.read(false); r.status != 200 { // the buffered body was skipped
		t.Fatalf("after POST: %d", r.status)
	}
}

func TestPipelining(t *testing.T) {
	_, ts, c := startSite(t)
	c.send(get("/hello.txt") + "HEAD /1k.bin HTTP/1.1\r\nHost: test\r\n\r\n" + get("/sub/deeper/z.txt"))
	if r := c.read(false); r.status != 200 || r.body != helloBody {
		t.Fatalf("1: %d %q", r.status, r.body)
	}
	if r := c.read(true); r.status != 200 || r.h.Get("Content-Length") != "1024" {
		t.Fatalf("2: %d %v", r.status, r.h)
	}
	if r := c.read(false); r.status != 200 || r.body != "z" {
		t.Fatalf("3: %d %q", r.status, r.body)
	}
	// Still open (keep-alive), and a request split across writes works.
	c.send("GET /hello.txt HT")
	time.Sleep(20 * time.Millisecond)
	c.send("TP/1.1\r\nHost: test\r\n\r\n")
	if r := c.read(false); r.status != 200 {
		t.Fatalf("4: %d", r.status)
	}
	// Connection: close and HTTP/1.0 close after the response.
	c.send(get("/hello.txt", "Connection: close\r\n"))
	if r := c.read(false); r.status != 200 || r.h.Get("Connection") != "close" {
		t.Fatalf("close: %d %v", r.status, r.h)
	}
	c.closed()
	c2 := ts.dial(t)
	c2.send("GET /hello.txt HTTP/1.0\r\n\r\n")
	if r := c2.read(false); r.status != 200 {
		t.Fatalf("1.0: %d", r.status)
	}
	c2.closed()
	c3 := ts.dial(t)
	c3.send("GET /hello.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /hello.txt HTTP/1.0\r\n\r\n")
	if r := c3.read(false); r.status != 200 || r.h.Get("Connection") != "keep-alive" {
		t.Fatalf("1.0 keep-alive: %d %v", r.status, r.h)
	}
	if r := c3.read(false); r.status != 200 || r.h.Get("Connection") != "close" {
		t.Fatalf("1.0 second: %d %v", r.status, r.h)
	}
	c3.closed()
}

func TestConditional(t *testing.T) {
	_, _, c := startSite(t)
	for _, path := range []string{"/hello.txt", "/big.bin"} { // cached and sendfile paths
		c.send("HEAD " + path + " HTTP/1.1\r\nHost: test\r\n\r\n")
		h := c.read(true).h
		etag, lm := h.Get("ETag"), h.Get("Last-Modified")
		cases := []struct {
			hdr  string
			want int
		}{
			{"If-None-Match: " + etag + "\r\n", 304},
			{"If-None-Match: \"other\", " + etag + "\r\n", 304},
			{"If-None-Match: W/" + etag + "\r\n", 304},
			{"If-None-Match: *\r\n", 304},
			{"If-None-Match: \"other\"\r\n", 200},
			{"If-Modified-Since: " + lm + "\r\n", 304},
			{"If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n", 200},
			{"If-Modified-Since: garbage\r\n", 200},
			// If-None-Match takes precedence over If-Modified-Since.
			{"If-None-Match: \"other\"\r\nIf-Modified-Since: " + lm + "\r\n", 200},
		}
		for _, tc := range cases {
			c.send(get(path, tc.hdr))
			r := c.read(false)
			if r.status != tc.want {
				t.Fatalf("%s %q: %d, want %d", path, tc.hdr, r.status, tc.want)
			}
			if r.status == 304 && (r.h.Get("ETag") != etag || r.h.Get("Content-Length") != "") {
				t.Fatalf("304 headers: %v", r.h)
			}
		}
	}
}

func TestRange(t *testing.T) {
	_, _, c := startSite(t)
	big := bigBody()
	size := strconv.Itoa(len(big))
	cases := []struct {
		path, rng  string
		status     int
		body, crng string
	}{
		{"/hello.txt", "bytes=0-4", 206, "hello", "bytes 0-4/13"},
		{"/hello.txt", "bytes=-6", 206, "world\n", "bytes 7-12/13"},
		{"/hello.txt", "bytes=7-", 206, "world\n", "bytes 7-12/13"},
		{"/hello.txt", "bytes=7-1000", 206, "world\n", "bytes 7-12/13"},
		{"/hello.txt", "bytes=13-", 416, "", "bytes */13"},
		{"/hello.txt", "bytes=0-1,2-4", 206, "hello", "bytes 0-4/13"}, // adjacent: coalesced
		{"/hello.txt", "bytes=x-y", 416, "", "bytes */13"},            // invalid: refused, as nginx
		{"/hello.txt", "bytes=0-9,0-9", 200, helloBody, ""},           // more bytes than the file: whole body, as nginx
		{"/big.bin", "bytes=90-98", 206, big[90:99], "bytes 90-98/" + size},
		{"/big.bin", "bytes=-9", 206, big[len(big)-9:], fmt.Sprintf("bytes %d-%d/%s", len(big)-9, len(big)-1, size)},
		{"/big.bin", "bytes=700000-", 416, "", "bytes */" + size},
	}
	for _, tc := range cases {
		c.send(get(tc.path, "Range: "+tc.rng+"\r\n"))
		r := c.read(false)
		if r.status != tc.status || r.body != tc.body || r.h.Get("Content-Range") != tc.crng {
			t.Fatalf("%s %s: %d %q %q", tc.path, tc.rng, r.status, r.body, r.h.Get("Content-Range"))
		}
	}
	// If-Range with a stale validator ignores the Range.
	c.send(get("/hello.txt", "Range: bytes=0-4\r\nIf-Range: \"stale\"\r\n"))
	if r := c.read(false); r.status != 200 || r.body != helloBody {
		t.Fatalf("If-Range stale: %d", r.status)
	}
}

func TestTraversalNeverLeaks(t *testing.T) {
	root, secret := site(t)
	ts := start(t, root, func(c *Config) { c.Site = &SiteRules{Listing: true} })
	targets := []string{
		"/../etc/passwd",
		"/../../../../etc/passwd",
		"/%2e%2e/etc/passwd",
		"/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
		"/sub/..%2f..%2fetc/passwd",
		"/hello.txt%00.html",
		"/a%00b",
		"/..\\..\\etc\\passwd",
		"/%5c..%5cetc%5cpasswd",
		"/leak.txt",
		"/leakdir/secret.txt",
		"/leakdir/",
		"//etc/passwd",
		"/%252e%252e/etc/passwd",
	}
	for _, target := range targets {
		c := ts.dial(t)
		c.send(get(target))
		r := c.read(false)
		if r.status != 400 && r.status != 403 && r.status != 404 {
			t.Errorf("%s: status %d", target, r.status)
		}
		if strings.Contains(r.body, secret) || strings.Contains(r.body, "root:") {
			t.Errorf("%s: leaked %q", target, r.body)
		}
	}
	// The listing of the root does not show the escaping symlinks either.
	c := ts.dial(t)
	c.send(get("/"))
	if r := c.read(false); strings.Contains(r.body, "leak") {
		t.Errorf("root listing shows an escaping link: %s", r.body)
	}
}

func TestMalformedCloses(t *testing.T) {
	root, _ := site(t)
	ts := start(t, root, nil)
	for _, in := range []string{
		"GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n",         // bare LF
		"GET / HTTP/1.1\r\n\r\n",                          // no Host
		"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", // obs-fold
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"GET\x00 / HTTP/1.1\r\nHost: a\r\n\r\n",
	} {
		c := ts.dial(t)
		c.send(in)
		if r := c.read(false); r.status != 400 || r.h.Get("Connection") != "close" {
			t.Fatalf("%q: %d %v", in, r.status, r.h)
		}
		c.closed()
	}
	c := ts.dial(t)
	c.send("GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("a", 10000) + "\r\n\r\n") // over 8 KiB + 1 KiB headroom
	if r := c.read(false); r.status != 431 {
		t.Fatalf("oversized head: %d", r.status)
	}
	c.closed()
}

func TestTimeouts(t *testing.T) {
	root, _ := site(t)
	ts := start(t, root, func(c *Config) {
		c.ReadTimeout = 100 * time.Millisecond
		c.IdleTimeout = 300 * time.Millisecond
	})
	// Slowloris: a head that never completes is cut.
	slow := ts.dial(t)
	slow.send("GET /hello.txt HTTP/1.1\r\nHo")
	stop := make(chan struct{})
	go func() { // keep trickling bytes that never finish the head
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if _, err := slow.nc.Write([]byte("o")); err != nil {
					return
				}
			}
		}
	}()
	slow.closed()
	close(stop)
	// Idle keep-alive connection is closed after a response.
	idle := ts.dial(t)
	idle.send(get("/hello.txt"))
	if r := idle.read(false); r.status != 200 {
		t.Fatal(r.status)
	}
	idle.closed()
}

func TestDirectories(t *testing.T) {
	root, _ := site(t)
	// Listings are off by default, as nginx's autoindex: 403.
	off := start(t, root, nil).dial(t)
	off.send(get("/sub/"))
	if r := off.read(false); r.status != 403 {
		t.Fatalf("listing off: %d", r.status)
	}
	ts := start(t, root, func(c *Config) { c.Site = &SiteRules{Listing: true} })
	c := ts.dial(t)
	c.send(get("/sub"))
	if r := c.read(false); r.status != 301 || r.h.Get("Location") != "/sub/" {
		t.Fatalf("redirect: %d %v", r.status, r.h)
	}
	c.send(get("/sub/"))
	r := c.read(false)
	if r.status != 200 || r.h.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("listing: %d %v", r.status, r.h)
	}
	for _, want := range []string{
		`<a href="a%20%3Cb%3E.txt">a &lt;b&gt;.txt</a>`,
		`<a href="x&amp;y%22.html">x&amp;y&#34;.html</a>`,
		`<a href="deeper/">deeper/</a>`,
		`<a href="../">../</a>`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("listing lacks %s:\n%s", want, r.body)
		}
	}
	// Every link of the listing resolves.
	for _, link := range []string{"/sub/a%20%3Cb%3E.txt", "/sub/x&y%22.html", "/sub/deeper/"} {
		c.send(get(link))
		if r := c.read(false); r.status != 200 {
			t.Errorf("%s: %d", link, r.status)
		}
	}
	c.send(get("/withindex/"))
	if r := c.read(false); r.status != 200 || r.body != "<h1>index</h1>" {
		t.Fatalf("index.html: %d %q", r.status, r.body)
	}
}

func TestStatusAndAccessLog(t *testing.T) {
	_, ts, c := startSite(t)
	c.send(get("/hello.txt") + get("/hello.txt") + get("/nope"))
	c.read(false)
	c.read(false)
	c.read(false)
	c.send(get("/.shoal/status"))
	r := c.read(false)
	if r.status != 200 || r.h.Get("Content-Type") != "application/json" {
		t.Fatalf("status: %d %v", r.status, r.h)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"active_connections", "requests", "bytes_sent", "cache_objects", "cache_bytes",
		"cache_hit_ratio", "byte_hit_ratio", "cpu_percent", "rss_bytes", "goroutines", "handoff_socket"} {
		if _, ok := m[k]; !ok {
			t.Errorf("status lacks %q: %s", k, r.body)
		}
	}
	if m["requests"].(float64) < 3 || m["cache_objects"].(float64) != 1 || m["cache_hit_ratio"].(float64) != 0.5 ||
		m["active_connections"].(float64) != 1 || m["rss_bytes"].(float64) <= 0 {
		t.Errorf("status values: %s", r.body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-ts.done; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	rd := trace.NewReader(strings.NewReader(ts.log.String()), trace.CLF)
	var recs []trace.Record
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	// The status request is a health check: not logged (Config.LogHealth).
	if len(recs) != 3 || rd.Malformed() != 0 {
		t.Fatalf("access log: %d records, %d malformed:\n%s", len(recs), rd.Malformed(), ts.log.String())
	}
	want := trace.Record{Host: "127.0.0.1", Method: "GET", URL: "/hello.txt", Proto: "HTTP/1.1", Status: 200, Bytes: 13}
	got := recs[0]
	got.Time = time.Time{}
	if got != want {
		t.Fatalf("record %+v, want %+v", got, want)
	}
	if recs[2].Status != 404 || time.Since(recs[0].Time) > time.Minute {
		t.Fatalf("records: %+v", recs)
	}
}

func TestShutdownClosesIdleAndFinishes(t *testing.T) {
	root, _ := site(t)
	ts := start(t, root, nil)
	idle := ts.dial(t)
	idle.send(get("/hello.txt"))
	idle.read(false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	idle.closed()
	if _, err := net.Dial("tcp", ts.addr); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
}

func TestPublishInvalidatesCache(t *testing.T) {
	_, ts, c := startSite(t)
	c.send(get("/hello.txt"))
	if r := c.read(false); r.body != helloBody {
		t.Fatalf("before: %q", r.body)
	}
	next := t.TempDir()
	if err := os.WriteFile(filepath.Join(next, "hello.txt"), []byte("version two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.srv.Store().Publish(next); err != nil {
		t.Fatal(err)
	}
	c.send(get("/hello.txt") + get("/1k.bin"))
	if r := c.read(false); r.status != 200 || r.body != "version two\n" {
		t.Fatalf("after publish: %d %q", r.status, r.body)
	}
	if r := c.read(false); r.status != 404 {
		t.Fatalf("removed file: %d", r.status)
	}
}

// A client that asks for a large file and never reads it (a slow reader,
// which through passfd holds the node's own connection) is
// cut after WriteTimeout, whether the body goes by sendfile or from cache.
func TestSendTimeoutCutsStalledReader(t *testing.T) {
	root, _ := site(t)
	f, err := os.Create(filepath.Join(root, "huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil { // sparse: reads as zeros
		t.Fatal(err)
	}
	f.Close()
	ts := start(t, root, func(c *Config) { c.WriteTimeout = 200 * time.Millisecond })
	for _, path := range []string{"/huge.bin", "/1k.bin"} {
		c := ts.dial(t)
		if path == "/1k.bin" { // many pipelined small requests: the cached path
			c.send(strings.Repeat(get(path), 20000))
		} else {
			c.send(get(path))
		}
		for end := time.Now().Add(5 * time.Second); ts.srv.Status().ActiveConnections == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("connection not accepted")
			}
		}
		for end := time.Now().Add(15 * time.Second); ts.srv.Status().ActiveConnections > 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: a client that does not read is still connected after %v", path, 15*time.Second)
			}
		}
	}
}

// Connection limits on the node (which holds handed-off connections the
// front no longer counts): at MaxConns the connection idle the longest is
// closed to make room; with none idle, the new one is closed.
func TestConnLimitClosesIdleFirst(t *testing.T) {
	root, _ := site(t)
	const max = 4
	ts := start(t, root, func(c *Config) { c.MaxConns = max })
	var idle []*client
	for range max {
		c := ts.dial(t)
		c.send(get("/hello.txt"))
		if r := c.read(false); r.status != 200 {
			t.Fatal(r.status)
		}
		idle = append(idle, c)
	}
	time.Sleep(time.Duration(2 * shedMinIdle))
	c := ts.dial(t)
	c.send(get("/hello.txt"))
	if r := c.read(false); r.status != 200 {
		t.Fatalf("new client at the limit: %d", r.status)
	}
	idle[0].closed()
	idle[max-1].send(get("/hello.txt"))
	if r := idle[max-1].read(false); r.status != 200 {
		t.Fatalf("most recently idle connection: %d", r.status)
	}
	if st := ts.srv.Status(); st.IdleClosed != 1 {
		t.Errorf("IdleClosed = %d, want 1", st.IdleClosed)
	}

	// Connections in the middle of a head are not idle: a new one is closed.
	ts2 := start(t, root, func(c *Config) { c.MaxConns = max })
	for range max {
		ts2.dial(t).send("GET /hello.txt HTTP/1.1\r\n")
	}
	for end := time.Now().Add(5 * time.Second); ts2.srv.Status().ActiveConnections < max; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("partial heads not accepted")
		}
	}
	time.Sleep(time.Duration(2 * shedMinIdle))
	over := ts2.dial(t)
	over.send(get("/hello.txt"))
	over.closed()
	if st := ts2.srv.Status(); st.ConnsRefused != 1 {
		t.Errorf("ConnsRefused = %d, want 1", st.ConnsRefused)
	}
}
