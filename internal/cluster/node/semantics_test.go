package node

import (
	"bytes"
	"compress/gzip"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPreconditionOrder checks If-Match, If-Unmodified-Since, If-None-Match,
// If-Modified-Since and If-Range in RFC 9110 §13.2.2's order, on the cached
// and the sendfile path.
func TestPreconditionOrder(t *testing.T) {
	_, _, c := startSite(t)
	old := "Sun, 06 Nov 1994 08:49:37 GMT"
	future := time.Now().Add(365 * 24 * time.Hour).UTC().Format(time.RFC1123)
	future = strings.Replace(future, "UTC", "GMT", 1)
	for _, path := range []string{"/hello.txt", "/big.bin"} {
		c.send("HEAD " + path + " HTTP/1.1\r\nHost: test\r\n\r\n")
		h := c.read(true).h
		etag, lm := h.Get("ETag"), h.Get("Last-Modified")
		cases := []struct {
			hdr  string
			want int
		}{
			{"If-Match: " + etag, 200},
			{"If-Match: \"x\", " + etag, 200},
			{"If-Match: *", 200},
			{"If-Match: \"x\"", 412},
			{"If-Match: W/" + etag, 412}, // strong comparison (§13.1.1)
			{"If-Unmodified-Since: " + lm, 200},
			{"If-Unmodified-Since: " + old, 412},
			{"If-Unmodified-Since: garbage", 200}, // ignored (§13.1.4)
			// §13.2.2 step 2: If-Unmodified-Since only without If-Match.
			{"If-Match: " + etag + "\r\nIf-Unmodified-Since: " + old, 200},
			// step 1 before step 3.
			{"If-Match: \"x\"\r\nIf-None-Match: " + etag, 412},
			{"If-Match: " + etag + "\r\nIf-None-Match: " + etag, 304},
			{"If-Unmodified-Since: " + lm + "\r\nIf-Modified-Since: " + lm, 304},
			{"If-Modified-Since: " + lm, 304},
			{"If-Modified-Since: " + future, 200}, // a date in the future is ignored
			{"If-Modified-Since: " + old, 200},
			{"Range: bytes=0-1\r\nIf-Match: \"x\"", 412},
			{"Range: bytes=0-1\r\nIf-Unmodified-Since: " + lm, 206},
			{"Range: bytes=0-1\r\nIf-Range: " + lm, 206},
			{"Range: bytes=0-1\r\nIf-Range: " + etag, 206},
			{"Range: bytes=0-1\r\nIf-Range: " + old, 200},
			{"Range: bytes=0-1\r\nIf-Range: W/" + etag, 200},
		}
		for _, tc := range cases {
			c.send(get(path, tc.hdr+"\r\n"))
			r := c.read(false)
			if r.status != tc.want {
				t.Fatalf("%s %q: %d, want %d", path, tc.hdr, r.status, tc.want)
			}
			if r.status == 412 && r.h.Get("Accept-Ranges") != "" {
				t.Fatalf("%s %q: 412 with Accept-Ranges", path, tc.hdr)
			}
		}
	}
}

// parts reads a multipart/byteranges body into "Content-Range=body" strings.
func parts(t *testing.T, r response) []string {
	t.Helper()
	mt, params, err := mime.ParseMediaType(r.h.Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" {
		t.Fatalf("Content-Type %q", r.h.Get("Content-Type"))
	}
	mr := multipart.NewReader(strings.NewReader(r.body), params["boundary"])
	var out []string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		out = append(out, p.Header.Get("Content-Type")+" "+p.Header.Get("Content-Range")+"="+string(b))
	}
}

// TestMultiRange checks multipart/byteranges answers on the cached and the
// sendfile path, and that HEAD announces the length GET sends.
func TestMultiRange(t *testing.T) {
	root, _, c := startSite(t)
	big := bigBody()
	bs := strconv.Itoa(len(big))
	const tp = "text/plain; charset=utf-8 "
	const bp = "application/octet-stream "
	cases := []struct {
		path, rng string
		want      []string
	}{
		{"/hello.txt", "bytes=0-1,3-4", []string{tp + "bytes 0-1/13=he", tp + "bytes 3-4/13=lo"}},
		{"/hello.txt", "bytes=-2,0-0", []string{tp + "bytes 11-12/13=d\n", tp + "bytes 0-0/13=h"}},
		{"/hello.txt", "bytes=0-1,1-2,7-8", []string{tp + "bytes 0-2/13=hel", tp + "bytes 7-8/13=wo"}},
		{"/big.bin", "bytes=9-17,100000-100008", []string{bp + "bytes 9-17/" + bs + "=" + big[9:18], bp + "bytes 100000-100008/" + bs + "=" + big[100000:100009]}},
	}
	for _, tc := range cases {
		c.send(get(tc.path, "Range: "+tc.rng+"\r\n"))
		r := c.read(false)
		if r.status != 206 || r.h.Get("Accept-Ranges") != "" || r.h.Get("Content-Range") != "" {
			t.Fatalf("%s %s: %d %v", tc.path, tc.rng, r.status, r.h)
		}
		if got := parts(t, r); strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Fatalf("%s %s: parts %q, want %q", tc.path, tc.rng, got, tc.want)
		}
		c.send("HEAD " + tc.path + " HTTP/1.1\r\nHost: t\r\nRange: " + tc.rng + "\r\n\r\n")
		if h := c.read(true); h.status != 206 || h.h.Get("Content-Length") != strconv.Itoa(len(r.body)) {
			t.Fatalf("HEAD %s %s: %d %s, GET body %d", tc.path, tc.rng, h.status, h.h.Get("Content-Length"), len(r.body))
		}
	}
	// More ranges than MaxRanges: the whole file.
	ts2 := start(t, root, func(c *Config) { c.MaxRanges = 2 })
	c2 := ts2.dial(t)
	c2.send(get("/hello.txt", "Range: bytes=0-0,2-2,4-4\r\n"))
	if r := c2.read(false); r.status != 200 || r.body != helloBody {
		t.Fatalf("beyond MaxRanges: %d %q", r.status, r.body)
	}
}

// gz returns s gzip-compressed.
func gz(t *testing.T, s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

// TestPrecompressed checks that "name.br" / "name.gz" answer for "name"
// when the client accepts the coding, with their own ETag, Vary on every
// file response of the name, ranges over the encoded bytes, and one cache
// object per encoding.
func TestPrecompressed(t *testing.T) {
	root, _ := site(t)
	css := strings.Repeat("body { color: red }\n", 50)
	gzBody := gz(t, css)
	brBody := []byte("pretend-brotli-bytes") // the node never decodes
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("style.css", []byte(css))
	write("style.css.gz", gzBody)
	write("style.css.br", brBody)
	write("plain.css", []byte(css))
	write("stale.css.gz", gzBody)
	past := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(root, "stale.css.gz"), past, past)
	write("stale.css", []byte(css))
	for _, mod := range []func(*Config){nil, func(c *Config) { c.CacheBytes = -1 }} {
		ts := start(t, root, mod)
		c := ts.dial(t)
		etags := map[string]string{}
		cases := []struct {
			path, ae, extra string
			status          int
			coding, body    string
			vary            bool
		}{
			{"/style.css", "", "", 200, "", css, true},
			{"/style.css", "gzip", "", 200, "gzip", string(gzBody), true},
			{"/style.css", "gzip, deflate, br", "", 200, "br", string(brBody), true},
			{"/style.css", "br;q=0, gzip;q=0.5", "", 200, "gzip", string(gzBody), true},
			{"/style.css", "gzip;q=0", "", 200, "", css, true},
			{"/style.css", "*", "", 200, "", css, true},
			{"/style.css", "", "", 200, "", css, true}, // identity again after the variants were cached
			{"/style.css", "gzip", "Range: bytes=0-9\r\n", 206, "gzip", string(gzBody[:10]), true},
			{"/plain.css", "gzip", "", 200, "", css, false},
			{"/stale.css", "gzip", "", 200, "", css, false},
			{"/style.css.gz", "gzip", "", 200, "", string(gzBody), false},
		}
		for _, tc := range cases {
			hdr := tc.extra
			if tc.ae != "" {
				hdr += "Accept-Encoding: " + tc.ae + "\r\n"
			}
			c.send(get(tc.path, hdr))
			r := c.read(false)
			vary := r.h.Get("Vary") == "Accept-Encoding"
			if r.status != tc.status || r.h.Get("Content-Encoding") != tc.coding || r.body != tc.body || vary != tc.vary {
				t.Fatalf("%s AE %q: %d CE %q Vary %q body %d bytes", tc.path, tc.ae, r.status, r.h.Get("Content-Encoding"), r.h.Get("Vary"), len(r.body))
			}
			if tc.path == "/style.css" && r.h.Get("Content-Type") != "text/css; charset=utf-8" && r.h.Get("Content-Type") != "text/css" {
				t.Fatalf("variant Content-Type %q", r.h.Get("Content-Type"))
			}
			if tc.path == "/style.css" && tc.status == 200 {
				if prev, ok := etags[tc.coding]; ok && prev != r.h.Get("ETag") {
					t.Fatalf("ETag of %q changed: %s %s", tc.coding, prev, r.h.Get("ETag"))
				}
				etags[tc.coding] = r.h.Get("ETag")
			}
		}
		if len(etags) != 3 || etags[""] == etags["gzip"] || etags["gzip"] == etags["br"] || etags[""] == etags["br"] {
			t.Fatalf("ETags per encoding not distinct: %v", etags)
		}
		// 304 for the gzip variant's ETag, with Vary.
		c.send(get("/style.css", "Accept-Encoding: gzip\r\nIf-None-Match: "+etags["gzip"]+"\r\n"))
		if r := c.read(false); r.status != 304 || r.h.Get("Vary") != "Accept-Encoding" || r.h.Get("ETag") != etags["gzip"] {
			t.Fatalf("304 for gzip: %d %v", r.status, r.h)
		}
		// The identity ETag does not validate the gzip variant.
		c.send(get("/style.css", "Accept-Encoding: gzip\r\nIf-None-Match: "+etags[""]+"\r\n"))
		if r := c.read(false); r.status != 200 || r.h.Get("Content-Encoding") != "gzip" {
			t.Fatalf("identity ETag on gzip: %d", r.status)
		}
		// HTTP/1.0 gets the identity (HTTP/1.0 caches ignore Vary).
		c.send("GET /style.css HTTP/1.0\r\nConnection: keep-alive\r\nAccept-Encoding: gzip\r\n\r\n")
		tp := textproto.NewReader(c.r)
		if line, _ := tp.ReadLine(); !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("HTTP/1.0: %q", line)
		}
		h, _ := tp.ReadMIMEHeader()
		if h.Get("Content-Encoding") != "" || h.Get("Vary") != "Accept-Encoding" {
			t.Fatalf("HTTP/1.0 headers: %v", h)
		}
		io.CopyN(io.Discard, c.r, int64(len(css)))
	}
	// A variant published later is picked up with the new table.
	ts := start(t, root, nil)
	c := ts.dial(t)
	c.send(get("/plain.css", "Accept-Encoding: gzip\r\n"))
	if r := c.read(false); r.h.Get("Content-Encoding") != "" || r.h.Get("Vary") != "" {
		t.Fatalf("before publish: %v", r.h)
	}
	write("plain.css.gz", gzBody)
	if _, err := ts.srv.Store().Publish(root); err != nil {
		t.Fatal(err)
	}
	c.send(get("/plain.css", "Accept-Encoding: gzip\r\n"))
	if r := c.read(false); r.h.Get("Content-Encoding") != "gzip" || r.h.Get("Vary") != "Accept-Encoding" || r.body != string(gzBody) {
		t.Fatalf("after publish: %v", r.h)
	}
}

// TestAcceptRangesOnEveryPath checks that Accept-Ranges: bytes is sent with
// a 200 for a file (cached or not, GET or HEAD) and on no other response,
// as nginx does.
func TestAcceptRangesOnEveryPath(t *testing.T) {
	_, _, c := startSite(t)
	c.send("HEAD /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n")
	etag := c.read(true).h.Get("ETag")
	cases := []struct {
		req  string
		head bool
		want string
	}{
		{get("/hello.txt"), false, "bytes"},
		{"HEAD /big.bin HTTP/1.1\r\nHost: t\r\n\r\n", true, "bytes"},
		{get("/big.bin"), false, "bytes"},
		{get("/withindex/"), false, "bytes"},
		{get("/hello.txt", "Range: bytes=0-1\r\n"), false, ""},
		{get("/hello.txt", "Range: bytes=0-1,3-4\r\n"), false, ""},
		{get("/hello.txt", "Range: bytes=100-\r\n"), false, ""},
		{get("/hello.txt", "If-None-Match: "+etag+"\r\n"), false, ""},
		{get("/hello.txt", "If-Match: \"x\"\r\n"), false, ""},
		{get("/missing"), false, ""},
		{get("/sub/"), false, ""},
		{get("/.shoal/status"), false, ""},
	}
	for _, tc := range cases {
		c.send(tc.req)
		r := c.read(tc.head)
		if got := r.h.Get("Accept-Ranges"); got != tc.want {
			t.Fatalf("%q: %d Accept-Ranges %q, want %q", tc.req, r.status, got, tc.want)
		}
	}
}
