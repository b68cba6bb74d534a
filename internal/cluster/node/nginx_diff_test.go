package node

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// The differential test serves one tree with nginx and with a shoal node
// and sends both the same requests: preconditions, single and multiple
// ranges, precompressed variants (and, in sites_test.go, per-site headers).
// Where shoal answers differently on purpose, the case names the RFC
// section and both answers are asserted, so a change on either side shows.

// nginxBin finds nginx (installed by .ci/run) or skips the test.
func nginxBin(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Skip("nginx is not installed (apt-get install nginx, or run .ci/run): differential test skipped")
	return ""
}

const brotliStaticModule = "/usr/lib/nginx/modules/ngx_http_brotli_static_module.so"

// startNginx runs nginx in the foreground (one process, no master) on a
// loopback port serving root with the given extra server directives, and
// returns its address. It is killed at cleanup.
func startNginx(t *testing.T, root, extra string) string {
	t.Helper()
	return startNginxServers(t, func(listen, brotli string) string {
		return fmt.Sprintf(`server {
		listen %s;
		root %s;
		gzip_static on;
		gzip_vary on;
		%s
		%s
	}`, listen, root, brotli, extra)
	})
}

// startNginxServers runs nginx with the server blocks servers returns for
// the listen address and the brotli_static directive ("" without the
// module).
func startNginxServers(t *testing.T, servers func(listen, brotli string) string) string {
	t.Helper()
	bin := nginxBin(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	load, brotli := "", ""
	if _, err := os.Stat(brotliStaticModule); err == nil {
		load = "load_module " + brotliStaticModule + ";"
		brotli = "brotli_static on;"
	}
	conf := fmt.Sprintf(`%s
daemon off;
master_process off;
pid %s/nginx.pid;
error_log %s/error.log;
events { worker_connections 128; }
http {
	include /etc/nginx/mime.types;
	default_type application/octet-stream;
	access_log off;
	client_body_temp_path %s;
	proxy_temp_path %s;
	fastcgi_temp_path %s;
	uwsgi_temp_path %s;
	scgi_temp_path %s;
	%s
}
`, load, dir, dir, dir, dir, dir, dir, dir, servers(addr, brotli))
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", cf, "-p", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("nginx: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if i == 200 {
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx did not start: %s %s", stderr.String(), b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawDo sends one raw request on a fresh connection and reads the answer.
func rawDo(t *testing.T, addr, raw string) (*http.Response, []byte) {
	t.Helper()
	c := sendRaw(t, addr, raw)
	defer c.Close()
	method := raw[:strings.IndexByte(raw, ' ')]
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%q: body: %v", raw, err)
	}
	return resp, body
}

// validators are one server's ETag and Last-Modified for a path, which the
// cases splice into their headers ({ETAG}, {LM}, ...).
func expand(s, etag, lm string, mod time.Time) string {
	date := func(t time.Time) string { return t.UTC().Format(http.TimeFormat) }
	return strings.NewReplacer(
		"{ETAG}", etag, "{LM}", lm,
		"{LM+10}", date(mod.Add(10*time.Second)),
		"{FUTURE}", date(time.Now().Add(48*time.Hour)),
		"{OLD}", "Sun, 06 Nov 1994 08:49:37 GMT",
	).Replace(s)
}

// answer is the comparable part of a response.
type answer struct {
	status int
	hdr    map[string]string
	body   string   // single-part bodies
	parts  []string // multipart: "Content-Range=bytes"
}

var comparedHeaders = []string{"Content-Range", "Accept-Ranges", "Vary", "Content-Encoding", "Cache-Control", "Expires"}

func summarize(t *testing.T, resp *http.Response, body []byte, errorBodies bool) answer {
	a := answer{status: resp.StatusCode, hdr: map[string]string{}}
	for _, h := range comparedHeaders {
		a.hdr[h] = resp.Header.Get(h)
	}
	// Expires relative to Date, so two servers a second apart agree.
	if e, err := http.ParseTime(a.hdr["Expires"]); err == nil && a.hdr["Expires"] != expiresEpoch && a.hdr["Expires"] != expiresMax {
		if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
			a.hdr["Expires"] = fmt.Sprintf("Date%+ds", int(e.Sub(d)/time.Second))
		}
	}
	if resp.StatusCode >= 400 && errorBodies {
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		a.hdr["Content-Type"] = mt
		a.body = string(body)
	}
	mt, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode == 200 || resp.StatusCode == 206 {
		// Media type only: shoal adds "; charset=utf-8" to text types,
		// nginx (without a charset directive) does not.
		a.hdr["Content-Type"] = mt
		a.hdr["Content-Length"] = resp.Header.Get("Content-Length")
		if mt == "multipart/byteranges" {
			delete(a.hdr, "Content-Length") // part headers differ in length
			mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
			for {
				p, err := mr.NextPart()
				if err != nil {
					break
				}
				b, _ := io.ReadAll(p)
				pt, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
				a.parts = append(a.parts, pt+" "+p.Header.Get("Content-Range")+"="+string(b))
			}
		} else {
			a.body = string(body)
		}
	}
	return a
}

func (a answer) String() string {
	return fmt.Sprintf("%d %v body %d bytes, %d parts", a.status, a.hdr, len(a.body), len(a.parts))
}

type diffCase struct {
	method, path, hdr string
	http10            bool
	// A deliberate difference: the statuses each server must give, the
	// part counts when both send multipart, and the RFC section.
	nginx, shoal           int
	nginxParts, shoalParts int
	// Or a header that differs: its value from each server; the rest of
	// the answers must agree.
	header, nginxVal, shoalVal string
	why                        string
	// host is the Host header; default "localhost".
	host string
}

func (c diffCase) raw(etag, lm string, mod time.Time) string {
	m := c.method
	if m == "" {
		m = "GET"
	}
	host := c.host
	if host == "" {
		host = "localhost"
	}
	v := "HTTP/1.1\r\nHost: " + host
	if c.http10 {
		v = "HTTP/1.0\r\nHost: " + host
	}
	h := expand(c.hdr, etag, lm, mod)
	if h != "" {
		h += "\r\n"
	}
	return m + " " + c.path + " " + v + "\r\nConnection: close\r\n" + h + "\r\n"
}

// runDiff sends every case to both servers and compares.
func runDiff(t *testing.T, ngx, shoal string, mod time.Time, errorBodies bool, cases []diffCase) {
	t.Helper()
	same, deliberate := 0, 0
	for _, c := range cases {
		var ans [2]answer
		for i, addr := range []string{ngx, shoal} {
			// Validators as this server sends them, for the same encoding.
			ae := ""
			for _, l := range strings.Split(c.hdr, "\r\n") {
				if strings.HasPrefix(l, "Accept-Encoding:") {
					ae = l + "\r\n"
				}
			}
			host := c.host
			if host == "" {
				host = "localhost"
			}
			h, _ := rawDo(t, addr, "HEAD "+c.path+" HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n"+ae+"\r\n")
			resp, body := rawDo(t, addr, c.raw(h.Header.Get("ETag"), h.Header.Get("Last-Modified"), mod))
			ans[i] = summarize(t, resp, body, errorBodies)
		}
		n, s := ans[0], ans[1]
		label := fmt.Sprintf("%s %s [%s]", c.method, c.path, strings.ReplaceAll(c.hdr, "\r\n", " | "))
		if c.why != "" {
			deliberate++
		}
		if c.header != "" {
			if n.hdr[c.header] != c.nginxVal || s.hdr[c.header] != c.shoalVal {
				t.Errorf("%s (deliberate, %s): %s nginx %q / shoal %q, want %q / %q", label, c.why, c.header, n.hdr[c.header], s.hdr[c.header], c.nginxVal, c.shoalVal)
			}
			delete(n.hdr, c.header)
			delete(s.hdr, c.header)
			if fmt.Sprint(n.status, n.hdr, n.body, n.parts) != fmt.Sprint(s.status, s.hdr, s.body, s.parts) {
				t.Errorf("%s:\n nginx %v\n shoal %v", label, n, s)
			}
			continue
		}
		if c.why != "" {
			if n.status != c.nginx || s.status != c.shoal || len(n.parts) != c.nginxParts || len(s.parts) != c.shoalParts {
				t.Errorf("%s (deliberate, %s): nginx %v / shoal %v; want statuses %d/%d, parts %d/%d",
					label, c.why, n, s, c.nginx, c.shoal, c.nginxParts, c.shoalParts)
			}
			continue
		}
		if fmt.Sprint(n.status, n.hdr, n.body, n.parts) != fmt.Sprint(s.status, s.hdr, s.body, s.parts) {
			t.Errorf("%s:\n nginx %v\n shoal %v", label, n, s)
			continue
		}
		same++
	}
	if same < len(cases)/2 {
		t.Errorf("only %d of %d cases agree", same, len(cases))
	}
	t.Logf("%d cases: %d answered identically, %d deliberate differences (each names its RFC section)", len(cases), same, deliberate)
}

// diffTree writes the shared tree: text and binary files, a file large
// enough for the sendfile path, and a stylesheet with gzip and brotli
// variants; every file gets the same modification time, a day ago.
func diffTree(t *testing.T) (root string, mod time.Time) {
	t.Helper()
	root, err := os.MkdirTemp("", "shoal-diff-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	css := strings.Repeat("body { color: #333 }\n", 100)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte(css))
	w.Close()
	files := map[string]string{
		"hello.txt":       helloBody,
		"1k.bin":          strings.Repeat("0123456789abcdef", 64),
		"big.bin":         bigBody(),
		"style.css":       css,
		"style.css.gz":    gz.String(),
		"style.css.br":    "not really brotli, never decoded by either server",
		"plain.js":        "console.log(1)\n",
		"dir/index.html":  "<h1>index</h1>\n",
		"dir/other.html":  "<p>other</p>\n",
		"images/logo.svg": "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n",
	}
	mod = time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	testutil.WriteTreeAt(t, root, files, mod)
	return root, mod
}

func TestDifferentialNginx(t *testing.T) {
	nginxBin(t)
	root, mod := diffTree(t)
	ngx := startNginx(t, root, "")
	shoal := start(t, root, nil).addr

	var cases []diffCase
	for _, p := range []string{"/hello.txt", "/big.bin"} {
		cases = append(cases, []diffCase{
			{path: p},
			{method: "HEAD", path: p},
			{path: p, hdr: "If-None-Match: {ETAG}"},
			{path: p, hdr: "If-None-Match: \"x\", {ETAG}"},
			{path: p, hdr: "If-None-Match: \"x\""},
			{path: p, hdr: "If-None-Match: *"},
			{path: p, hdr: "If-Modified-Since: {LM}"},
			{path: p, hdr: "If-Modified-Since: {OLD}"},
			{path: p, hdr: "If-Modified-Since: {FUTURE}"},
			{path: p, hdr: "If-Modified-Since: garbage"},
			{path: p, hdr: "If-Match: {ETAG}"},
			{path: p, hdr: "If-Match: \"x\", {ETAG}"},
			{path: p, hdr: "If-Match: *"},
			{path: p, hdr: "If-Match: \"x\""},
			{path: p, hdr: "If-Match: W/{ETAG}"},
			{path: p, hdr: "If-Unmodified-Since: {LM}"},
			{path: p, hdr: "If-Unmodified-Since: {OLD}"},
			{path: p, hdr: "If-Match: \"x\"\r\nIf-None-Match: {ETAG}"},
			{path: p, hdr: "If-Match: {ETAG}\r\nIf-None-Match: {ETAG}"},
			{path: p, hdr: "Range: bytes=0-4\r\nIf-Match: \"x\""},
			{path: p, hdr: "Range: bytes=0-4\r\nIf-None-Match: {ETAG}"},
			// Deliberate differences.
			{path: p, hdr: "If-Modified-Since: {LM+10}", nginx: 200, shoal: 304,
				why: "RFC 9110 §13.1.3: 304 when the last modification is earlier than or equal to the date (nginx's default if_modified_since exact wants equality)"},
			{path: p, hdr: "If-Unmodified-Since: garbage", nginx: 412, shoal: 200,
				why: "RFC 9110 §13.1.4: an invalid If-Unmodified-Since is ignored"},
			{path: p, hdr: "If-Match: {ETAG}\r\nIf-Unmodified-Since: {OLD}", nginx: 412, shoal: 200,
				why: "RFC 9110 §13.2.2 step 2: If-Unmodified-Since is evaluated only without If-Match"},
			{path: p, hdr: "If-None-Match: {ETAG}\r\nIf-Modified-Since: {OLD}", nginx: 200, shoal: 304,
				why: "RFC 9110 §13.2.2 step 4: If-Modified-Since is evaluated only without If-None-Match"},
		}...)
		for _, r := range []string{
			"bytes=0-4", "bytes=-6", "bytes=7-", "bytes=7-100000000", "bytes=0-0",
			"bytes=100000000-", "bytes=x", "bytes=5-2", "bytes=", "items=0-1", "BYTES=0-1",
			"bytes=0-1,3-4", "bytes=-2,0-0", "bytes=200000000-300000000,0-1", "bytes=0-1,,3-4",
			"bytes=0-999999,0-999999", "bytes= 0-1 , 4-5", "bytes=0-1,x",
		} {
			cases = append(cases, diffCase{path: p, hdr: "Range: " + r}, diffCase{method: "HEAD", path: p, hdr: "Range: " + r})
		}
		cases = append(cases, []diffCase{
			{path: p, hdr: "Range: bytes=0-4\r\nIf-Range: {ETAG}"},
			{path: p, hdr: "Range: bytes=0-4\r\nIf-Range: \"x\""},
			{path: p, hdr: "Range: bytes=0-4\r\nIf-Range: {LM}"},
			{path: p, hdr: "Range: bytes=0-4\r\nIf-Range: {OLD}"},
			{path: p, hdr: "Range: bytes=0-4,8-9\r\nIf-Range: {ETAG}"},
			{path: p, hdr: "Range: bytes=0-1,1-2,8-9", nginx: 206, shoal: 206, nginxParts: 3, shoalParts: 2,
				why: "RFC 9110 §14.3: overlapping ranges coalesced (nginx sends each as asked)"},
			{path: p, hdr: "Range: bytes=0-1,2-3", nginx: 206, shoal: 206, nginxParts: 2, shoalParts: 0,
				why: "RFC 9110 §14.3: adjacent ranges coalesced into one single-part 206"},
		}...)
	}
	cases = append(cases, []diffCase{
		{path: "/big.bin", hdr: "Range: bytes=9-17,100000-100008,500000-"},
		{path: "/style.css"},
		{path: "/style.css", hdr: "Accept-Encoding: gzip", header: "Accept-Ranges", nginxVal: "", shoalVal: "bytes",
			why: "RFC 9110 §14.3: ranges are offered on the encoded representation too (§14.1.2); nginx 1.22 omits Accept-Ranges on gzip_static"},
		{path: "/style.css", hdr: "Accept-Encoding: gzip;q=0"},
		{path: "/style.css", hdr: "Accept-Encoding: deflate"},
		{path: "/style.css", hdr: "Accept-Encoding: gzip", http10: true},
		{path: "/style.css", hdr: "Accept-Encoding: gzip\r\nIf-None-Match: {ETAG}"},
		{path: "/style.css", hdr: "If-None-Match: {ETAG}"},
		{method: "HEAD", path: "/style.css", hdr: "Accept-Encoding: gzip", header: "Accept-Ranges", nginxVal: "", shoalVal: "bytes",
			why: "RFC 9110 §14.3: ranges are offered on the encoded representation too (§14.1.2); nginx 1.22 omits Accept-Ranges on gzip_static"},
		{path: "/style.css", hdr: "Range: bytes=0-9"},
		{path: "/style.css.gz", hdr: "Accept-Encoding: gzip", header: "Content-Type", nginxVal: "application/octet-stream", shoalVal: "application/gzip",
			why: "RFC 6713 §3 registers application/gzip; nginx's mime.types has no .gz"},
		{path: "/plain.js", hdr: "Accept-Encoding: gzip", header: "Content-Type", nginxVal: "application/javascript", shoalVal: "text/javascript",
			why: "RFC 9239 §6: text/javascript; nginx 1.22's mime.types predates it"},
		{path: "/dir/", hdr: "Accept-Encoding: gzip"},
		{path: "/images/logo.svg"},
		{path: "/1k.bin", hdr: "Range: bytes=1000-,0-9"},
		// Precompressed responses answer Range over the encoded bytes.
		{path: "/style.css", hdr: "Accept-Encoding: gzip\r\nRange: bytes=0-9", nginx: 200, shoal: 206,
			why: "RFC 9110 §14.1.2: a range selects bytes of the selected (encoded) representation; nginx 1.22 ignores Range on gzip_static"},
	}...)
	if _, err := os.Stat(brotliStaticModule); err == nil {
		cases = append(cases,
			diffCase{path: "/style.css", hdr: "Accept-Encoding: gzip, deflate, br", header: "Accept-Ranges", nginxVal: "", shoalVal: "bytes", why: "as above"},
			diffCase{path: "/style.css", hdr: "Accept-Encoding: br;q=0, gzip", header: "Accept-Ranges", nginxVal: "", shoalVal: "bytes", why: "as above"},
		)
	}
	runDiff(t, ngx, shoal, mod, false, cases)
}

// TestDifferentialNginxSiteRules compares a site's rules file with the
// nginx configuration a customer would have written for the same intent:
// expires and add_header by location, error_page, autoindex off.
func TestDifferentialNginxSiteRules(t *testing.T) {
	nginxBin(t)
	root, mod := diffTree(t)
	files := map[string]string{
		SiteFile: `
[error_pages]
404 = "/errors/404.html"
403 = "/errors/403.html"
[[headers]]
match = "/assets/"
expires = "720h"
[[headers]]
match = "/old/"
expires = "epoch"
[[headers]]
match = "/forever.bin"
expires = "max"
[[headers]]
match = "*.html"
cache_control = "no-cache"
`,
		"errors/404.html":  "<h1>custom 404</h1>\n",
		"errors/403.html":  "<h1>custom 403</h1>\n",
		"assets/app.css":   strings.Repeat("a{}", 100),
		"assets/d/e.json":  "{}",
		"old/x.bin":        "x",
		"forever.bin":      "f",
		"emptydir/a/b.txt": "b",
	}
	testutil.WriteTreeAt(t, root, files, mod)
	ngx := startNginx(t, root, `
		location /assets/ { expires 720h; }
		location /old/ { expires epoch; }
		location = /forever.bin { expires max; }
		location ~ \.html$ { add_header Cache-Control "no-cache"; }
		error_page 404 /errors/404.html;
		error_page 403 /errors/403.html;`)
	shoal := start(t, root, nil).addr
	cases := []diffCase{
		{path: "/assets/app.css"},
		{path: "/assets/app.css", hdr: "Range: bytes=0-9"},
		{path: "/assets/app.css", hdr: "Range: bytes=0-1,5-6"},
		{path: "/assets/app.css", hdr: "If-None-Match: {ETAG}"},
		{method: "HEAD", path: "/assets/app.css"},
		{path: "/assets/d/e.json"},
		{path: "/old/x.bin"},
		{path: "/forever.bin"},
		{path: "/dir/other.html"},
		{path: "/dir/"},
		{path: "/hello.txt"},
		{path: "/missing.html"},
		{path: "/assets/missing.css"},
		{path: "/emptydir/a/"},
		{path: "/.shoal.toml", nginx: 200, shoal: 404,
			why: "shoal never serves dot-names (content package), so the rules file stays private"},
	}
	runDiff(t, ngx, shoal, mod, true, cases)
}

// TestDifferentialNginxVHosts compares `--vhosts` with nginx name-based
// virtual hosts: one server block per site folder, a default_server for
// other names, and server_name aliases.
func TestDifferentialNginxVHosts(t *testing.T) {
	nginxBin(t)
	root, err := os.MkdirTemp("", "shoal-diff-vh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	mod := time.Now().Add(-time.Hour).Truncate(time.Second)
	testutil.WriteTreeAt(t, root, map[string]string{
		"a.example/index.html": "<h1>A</h1>\n",
		"a.example/only-a.txt": "only on A\n",
		"b.example/index.html": "<h1>B</h1>\n",
		"b.example/x.css":      strings.Repeat("b{}", 50),
		"_default/index.html":  "<h1>default</h1>\n",
	}, mod)
	ngx := startNginxServers(t, func(listen, brotli string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "server { listen %s default_server; root %s/_default; }\n", listen, root)
		fmt.Fprintf(&b, "server { listen %s; server_name a.example www.a.example; root %s/a.example; }\n", listen, root)
		fmt.Fprintf(&b, "server { listen %s; server_name b.example; root %s/b.example; }\n", listen, root)
		return b.String()
	})
	shoal := start(t, root, func(c *Config) {
		c.VHosts = true
		c.Aliases = map[string]string{"www.a.example": "a.example"}
	}).addr
	var cases []diffCase
	for _, host := range []string{"a.example", "A.EXAMPLE:80", "www.a.example", "b.example", "c.example"} {
		for _, p := range []string{"/", "/index.html", "/only-a.txt", "/x.css", "/missing"} {
			cases = append(cases, diffCase{path: p, hdr: "X-Site: " + host, host: host})
		}
	}
	cases = append(cases, diffCase{path: "http://b.example/index.html", host: "a.example"})
	runDiff(t, ngx, shoal, mod, false, cases)
}
