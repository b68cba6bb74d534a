package up

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/cluster/publish"
	"shoal/internal/tools/loadgen"
)

// TestPublishUnderLoad checks publishing under load: a running 4-node cluster
// under load from the load generator gets a changed and a new file through
// POST /publish; when the call returns, every node serves the new bytes of
// both (the switch window is over), the ETag of the changed file changed,
// and the load saw no failed request.
func TestPublishUnderLoad(t *testing.T) {
	dataDir, siteDir := t.TempDir(), t.TempDir()
	var targets loadgen.List
	for i := range 40 {
		name := fmt.Sprintf("/f%02d.html", i)
		targets = append(targets, name)
		if err := os.WriteFile(filepath.Join(siteDir, name), []byte(strings.Repeat("v1 ", 100+i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Start(Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", DataDir: dataDir, Site: siteDir, Nodes: 4, CacheMB: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	fetch := func(base, path string) (string, string) {
		t.Helper()
		resp, err := http.Get(strings.TrimSuffix(base, "/") + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Sprint(resp.StatusCode), ""
		}
		return string(b), resp.Header.Get("ETag")
	}
	oldBody, oldTag := fetch(c.NodeURLs[0], "/f07.html")

	// Load: every URL of the site, keep-alive, through the front.
	r, err := loadgen.New(loadgen.Config{URL: strings.TrimSuffix(c.URL, "/"), Workload: targets, Connections: 8, Duration: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	type out struct {
		res *loadgen.Result
		err error
	}
	done := make(chan out, 1)
	go func() { res, err := r.Run(context.Background()); done <- out{res, err} }()
	time.Sleep(time.Second)

	// The operator edits a copy of the site and publishes it.
	next := t.TempDir()
	for _, u := range targets {
		b, _ := os.ReadFile(filepath.Join(siteDir, u))
		os.WriteFile(filepath.Join(next, u), b, 0o644)
	}
	changed, added := "version two of f07\n", "a new page\n"
	os.WriteFile(filepath.Join(next, "f07.html"), []byte(changed), 0o644)
	os.WriteFile(filepath.Join(next, "new.html"), []byte(added), 0o644)
	body := strings.NewReader(fmt.Sprintf(`{"dir": %q}`, next))
	req, _ := http.NewRequest("POST", c.AdminURL+"/publish", body)
	req.Header.Set("Authorization", "Bearer "+c.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var res publish.Result
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || json.Unmarshal(raw, &res) != nil {
		t.Fatalf("POST /publish: %d %s", resp.StatusCode, raw)
	}
	took := time.Since(t0)
	for i, u := range c.NodeURLs {
		if b, tag := fetch(u, "/f07.html"); b != changed || tag == oldTag || tag == "" {
			t.Errorf("node %d after publish: /f07.html %q ETag %s (before: %d bytes, ETag %s)", i, b, tag, len(oldBody), oldTag)
		}
		if b, _ := fetch(u, "/new.html"); b != added {
			t.Errorf("node %d after publish: /new.html %q", i, b)
		}
	}
	if b, _ := fetch(c.URL, "/new.html"); b != added {
		t.Errorf("front after publish: /new.html %q", b)
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	var failed uint64
	for _, n := range o.res.Errors {
		failed += n
	}
	if failed != 0 || o.res.OK != o.res.Requests || o.res.Requests == 0 {
		t.Fatalf("load: %d requests, %d OK, errors %v", o.res.Requests, o.res.OK, o.res.Errors)
	}
	t.Logf("published version %d to %d nodes under %d requests (%.0f/s): snapshot %v, prepare %v, switch window %v, POST /publish %v",
		res.Version, res.Nodes, o.res.Requests, o.res.RPS(), res.Snapshot, res.Prepare, res.Switch, took)
	if res.Version != 1 || res.Nodes != 4 || len(res.Added) != 1 || res.Added[0] != "/new.html" {
		t.Errorf("result %+v", res)
	}
}

// TestProcsPublish publishes to node processes (the passfd path of `shoal
// up`), which take the version through their publish endpoint with the
// admin token: afterwards every node process serves the new file.
func TestProcsPublish(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shoal binary")
	}
	dataDir, siteDir, next := t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(siteDir, "a.html"), []byte("one"), 0o644)
	os.WriteFile(filepath.Join(next, "a.html"), []byte("two"), 0o644)
	os.WriteFile(filepath.Join(next, "b.html"), []byte("new"), 0o644)
	p := startProcs(t, Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", DataDir: dataDir, Nodes: 2, Site: siteDir}, "hybrid")
	res, err := p.Publisher.Publish(context.Background(), next)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range p.NodeURLs {
		for path, want := range map[string]string{"/a.html": "two", "/b.html": "new"} {
			resp, err := http.Get(u + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != want {
				t.Errorf("node %s %s: %d %q, want %q", u, path, resp.StatusCode, b, want)
			}
		}
	}
	if res.Nodes != 2 || len(res.Added) != 1 {
		t.Errorf("result %+v", res)
	}
}
