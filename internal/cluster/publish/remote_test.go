package publish

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/sitetar"
	"shoal/internal/cluster/node"
	"shoal/internal/testutil"
)

const testToken = "0123456789abcdef0123456789abcdef"

// startNode runs a node.Server over root with the publish endpoint set to
// versions (off when token is "").
func startNode(t *testing.T, root, versions, token string) string {
	t.Helper()
	srv, err := node.New(node.Config{Root: root, PublishToken: token, PublishDir: versions,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + testutil.Serve(t, srv)
}

// TestRemoteNodes publishes to two nodes over their control endpoint, and
// checks the endpoint's refusals one by one.
func TestRemoteNodes(t *testing.T) {
	site, versions, other := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(site, "a.html"), "one", time.Time{})
	urls := []string{startNode(t, site, versions, testToken), startNode(t, site, versions, testToken)}
	off := startNode(t, site, versions, "")
	c, err := New(Config{Versions: versions, Current: site, Nodes: func() []Participant {
		return []Participant{Remote(urls[0], testToken, nil), Remote(urls[1], testToken, nil)}
	}})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(site, "a.html"), "two!", time.Time{})
	res, err := c.Publish(context.Background(), site)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range urls {
		resp, err := http.Get(u + "/a.html")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "two!" {
			t.Errorf("%s after publish: %q", u, b)
		}
	}
	if len(res.Changed) != 2 {
		t.Errorf("diff from the node: %+v", res)
	}

	os.MkdirAll(filepath.Join(versions, "v000009"), 0o755)
	for _, tc := range []struct {
		name, method, base, path, token string
		code                            int
		body                            string
	}{
		{"endpoint off", "POST", off, "/.shoal/publish/abort?version=1", testToken, 404, ""},
		{"GET", "GET", urls[0], "/.shoal/publish/abort?version=1", testToken, 405, ""},
		{"no token", "POST", urls[0], "/.shoal/publish/abort?version=1", "", 401, ""},
		{"wrong token", "POST", urls[0], "/.shoal/publish/abort?version=1", strings.Repeat("z", 32), 401, ""},
		{"root outside", "POST", urls[0], "/.shoal/publish/prepare?version=9&root=" + other, testToken, 403, "not inside the publish folder"},
		{"root climbs out", "POST", urls[0], "/.shoal/publish/prepare?version=9&root=" + versions + "/../" + filepath.Base(other), testToken, 403, "not inside"},
		{"old version", "POST", urls[0], "/.shoal/publish/prepare?version=1&root=" + versions + "/v000009", testToken, 409, "already at version 1"},
		{"commit unprepared", "POST", urls[0], "/.shoal/publish/commit?version=5", testToken, 409, "not prepared"},
		{"bad version", "POST", urls[0], "/.shoal/publish/commit?version=x", testToken, 400, "positive integer"},
		{"unknown op", "POST", urls[0], "/.shoal/publish/delete?version=3", testToken, 404, ""},
		{"prepare ok", "POST", urls[0], "/.shoal/publish/prepare?version=9&root=" + versions + "/v000009", testToken, 200, "{}"},
	} {
		req, _ := http.NewRequest(tc.method, tc.base+tc.path, http.NoBody)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.body) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, b, tc.code, tc.body)
		}
	}
}

// TestFetchAcrossHosts stands for nodes on other hosts: each has its own
// publish folder, the versions folder is not shared, and each node fetches
// the version from the coordinator's tar stream (GET /publish/versions/{v}
// on the admin API) in its prepare. Both serve the new bytes with the same
// ETag as each other; a stream with a name that climbs out is refused.
func TestFetchAcrossHosts(t *testing.T) {
	site, versions := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(site, "a.html"), "one", time.Time{})
	writeFile(t, filepath.Join(site, "d/b.css"), "b", time.Time{})
	own := []string{t.TempDir(), t.TempDir()}
	urls := []string{startNode(t, site, own[0], testToken), startNode(t, site, own[1], testToken)}
	var c *Coordinator
	vs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			http.Error(w, "token", 401)
			return
		}
		v, _ := strconv.ParseUint(strings.TrimPrefix(r.URL.Path, "/publish/versions/"), 10, 64)
		if err := c.WriteVersion(w, v); err != nil {
			http.Error(w, err.Error(), 404)
		}
	}))
	defer vs.Close()
	var err error
	c, err = New(Config{Versions: versions, Nodes: func() []Participant {
		return []Participant{RemoteFetch(urls[0], testToken, vs.URL+"/publish/versions", nil), RemoteFetch(urls[1], testToken, vs.URL+"/publish/versions", nil)}
	}})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(site, "a.html"), "two!", time.Time{})
	for range 3 { // three versions: each node keeps the last two it fetched
		if _, err := c.Publish(context.Background(), site); err != nil {
			t.Fatal(err)
		}
	}
	var tags []string
	for _, u := range urls {
		for _, path := range []string{"/a.html", "/d/b.css"} {
			resp, err := http.Get(u + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := map[string]string{"/a.html": "two!", "/d/b.css": "b"}[path]; string(b) != want {
				t.Errorf("%s%s: %q, want %q", u, path, b, want)
			}
			if path == "/a.html" {
				tags = append(tags, resp.Header.Get("ETag"))
			}
		}
	}
	if tags[0] == "" || tags[0] != tags[1] {
		t.Errorf("ETags differ across hosts: %v", tags)
	}
	for _, dir := range own {
		if ents, _ := os.ReadDir(dir); len(ents) != 2 {
			t.Errorf("%s holds %d fetched versions, want 2", dir, len(ents))
		}
	}

	// A hostile stream: one entry named ../x.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "../x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	tw.Write([]byte("x"))
	tw.Close()
	dst := filepath.Join(t.TempDir(), "v")
	if err := sitetar.Extract(&buf, dst); err == nil || !strings.Contains(err.Error(), "leaves the version") {
		t.Fatalf("hostile tar: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dst), "x")); err == nil {
		t.Fatal("hostile tar wrote outside its folder")
	}
}
