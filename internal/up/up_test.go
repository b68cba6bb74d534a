package up

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/config"
	"shoal/internal/tools/site"
)

// TestUpServesWholeSite starts the default cluster on free ports and fetches
// the index and every file it links, through the front-end, checking each
// size against the site's manifest; then Range, conditional and traversal
// requests through the front.
func TestUpServesWholeSite(t *testing.T) {
	if testing.Short() {
		t.Skip("generates the 40 MB sample site; skipped with -short")
	}
	dataDir := t.TempDir()
	c, files := startSample(t, Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", DataDir: dataDir, Nodes: 3, CacheMB: 8})
	want := map[string]int64{}
	for _, f := range files {
		want[f.URL] = f.Size
	}

	get := func(path string, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", strings.TrimSuffix(c.URL, "/")+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s body: %v", path, err)
		}
		return resp, b
	}

	// Crawl from "/" through every index page.
	href := regexp.MustCompile(`href="(/[^"]*)"`)
	seen := map[string]bool{}
	queue := []string{"/"}
	fetched := 0
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		resp, body := get(p)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d", p, resp.StatusCode)
		}
		fetched++
		if size, ok := want[p]; ok && int64(len(body)) != size {
			t.Errorf("GET %s: %d bytes, manifest says %d", p, len(body), size)
		}
		if strings.HasSuffix(p, ".html") || p == "/" {
			for _, m := range href.FindAllStringSubmatch(string(body), -1) {
				queue = append(queue, m[1])
			}
		}
	}
	for u := range want {
		if !seen[u] && !strings.HasSuffix(u, "manifest.txt") {
			t.Errorf("%s is in the manifest but not linked from the index", u)
		}
	}
	if fetched < len(files) {
		t.Errorf("fetched %d pages and files, manifest lists %d", fetched, len(files))
	}

	// Range, conditional and traversal requests through the front.
	var big string
	for u, s := range want {
		if s > 4096 && strings.HasSuffix(u, ".txt") {
			big = u
			break
		}
	}
	resp, body := get(big, "Range", "bytes=10-19")
	if resp.StatusCode != 206 || len(body) != 10 || !strings.HasPrefix(resp.Header.Get("Content-Range"), "bytes 10-19/") {
		t.Errorf("Range: %d, %d bytes, %q", resp.StatusCode, len(body), resp.Header.Get("Content-Range"))
	}
	if resp, _ := get(big, "Range", "bytes=999999999-"); resp.StatusCode != 416 {
		t.Errorf("unsatisfiable Range = %d, want 416", resp.StatusCode)
	}
	resp, _ = get(big)
	etag, lastMod := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	if resp, _ := get(big, "If-None-Match", etag); resp.StatusCode != 304 {
		t.Errorf("If-None-Match = %d, want 304", resp.StatusCode)
	}
	if resp, _ := get(big, "If-Modified-Since", lastMod); resp.StatusCode != 304 {
		t.Errorf("If-Modified-Since = %d, want 304", resp.StatusCode)
	}
	outside := filepath.Join(filepath.Dir(dataDir), "secret.txt")
	os.WriteFile(outside, []byte("secret"), 0o644)
	for _, p := range []string{"/../secret.txt", "/%2e%2e/secret.txt", "/docs/..%2f..%2fsecret.txt", "/%00", "/a%5c..%5csecret.txt"} {
		resp, body := get(p)
		if resp.StatusCode < 400 || strings.Contains(string(body), "secret") {
			t.Errorf("traversal %s = %d %q", p, resp.StatusCode, body)
		}
	}
}

// TestUpCommandStopsOnSIGTERM runs the real binary and checks it exits 0
// within 5 s of SIGTERM.
func TestUpCommandStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "shoal")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/shoal").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	site := filepath.Join(dir, "www")
	os.MkdirAll(site, 0o755)
	os.WriteFile(filepath.Join(site, "index.html"), []byte("<a href=\"/x\">x</a>"), 0o644)
	cmd := exec.Command(bin, "up", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--admin", "off", "--site", site, "--nodes", "2")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	n, _ := io.ReadAtLeast(stdout, buf, len("shoal is up: open http://"))
	url := regexp.MustCompile(`http://[0-9.:]+/`).FindString(string(buf[:n]))
	if url == "" {
		cmd.Process.Kill()
		t.Fatalf("no URL printed: %q", buf[:n])
	}
	if resp, err := http.Get(url); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %v %v", url, resp, err)
	}
	go io.Copy(io.Discard, stdout)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v, want status 0", err)
		}
	case <-ctx.Done():
		cmd.Process.Kill()
		t.Fatal("still running 5 s after SIGTERM")
	}
}

// TestUpRedirect starts the cluster on the redirect path: the front answers
// 302 with the chosen node's own URL, and following it gives the file.
func TestUpRedirect(t *testing.T) {
	if testing.Short() {
		t.Skip("generates the sample site; skipped with -short")
	}
	c, files := startSample(t, Config{Listen: "127.0.0.1:0", Admin: "off", Nodes: 2, CacheMB: 8, Redirect: true})
	f := files[len(files)/2]
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(strings.TrimSuffix(c.URL, "/") + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	onNode := false
	for _, u := range c.NodeURLs {
		onNode = onNode || loc == u+f.URL
	}
	if resp.StatusCode != 302 || !onNode {
		t.Fatalf("GET %s: %d Location %q, want 302 to one of %v", f.URL, resp.StatusCode, loc, c.NodeURLs)
	}
	resp, err = http.Get(strings.TrimSuffix(c.URL, "/") + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || n != f.Size {
		t.Fatalf("following the redirect: %d, %d bytes (want %d), %v", resp.StatusCode, n, f.Size, err)
	}
}

// TestUpFrontHasTheFrontsLimits: `shoal up`'s front queues requests beyond
// max_conn_per_node like `shoal front` does, from the same default
// (config.DefaultFront); it once ran with no per-node limit at all.
func TestUpFrontHasTheFrontsLimits(t *testing.T) {
	site := t.TempDir()
	os.WriteFile(filepath.Join(site, "a.txt"), []byte("a"), 0o644)
	c, err := Start(Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Site: site, Nodes: 1, CacheMB: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := config.DefaultFront().Limits
	if c.frontCfg.MaxConn != want.MaxConnPerNode || c.frontCfg.QueueTimeout != want.QueueTimeout.Duration {
		t.Errorf("up's front: max_conn_per_node %d, queue_timeout %v; shoal front's defaults %d, %v",
			c.frontCfg.MaxConn, c.frontCfg.QueueTimeout, want.MaxConnPerNode, want.QueueTimeout.Duration)
	}
}

// startSample starts cfg, whose data folder (a fresh temporary one when
// cfg.DataDir is "") gets the sample site; it returns the cluster, closed
// when the test ends, and the site's manifest.
func startSample(t *testing.T, cfg Config) (*Cluster, []site.File) {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	files, err := site.Manifest(filepath.Join(cfg.DataDir, "site"))
	if err != nil {
		t.Fatal(err)
	}
	return c, files
}
