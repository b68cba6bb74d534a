package up

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// shutdownAtEnd shuts s (a Cluster or Procs) down when the test ends,
// waiting at most grace for it.
func shutdownAtEnd(t *testing.T, s interface{ Shutdown(context.Context) error }, grace time.Duration) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		s.Shutdown(ctx)
	})
}

// TestUpVHosts starts the cluster with the two sample sites and fetches
// each site's home page and manifest through the front by Host name: both
// answer, with different content.
func TestUpVHosts(t *testing.T) {
	c, err := Start(Config{Listen: "127.0.0.1:0", Admin: "off", DataDir: t.TempDir(), Nodes: 2, CacheMB: 8, VHosts: true})
	if err != nil {
		t.Fatal(err)
	}
	shutdownAtEnd(t, c, 3*time.Second)
	if !strings.Contains(c.SiteInfo, "a.localhost, b.localhost") {
		t.Fatalf("site info %q", c.SiteInfo)
	}
	checkSampleSites(t, c.URL, &http.Transport{})
	// The address `shoal up` prints answers too (it once gave 404): a
	// page naming the sites, with their addresses on the same port.
	resp, err := http.Get(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "a.localhost") || !strings.Contains(string(b), "b.localhost") {
		t.Errorf("GET %s: %d %q, want a page naming the sites", c.URL, resp.StatusCode, b)
	}
	port := c.URL[strings.LastIndexByte(strings.TrimSuffix(c.URL, "/"), ':'):]
	if got, want := strings.Join(c.SiteURLs(), " "), "http://a.localhost"+port+" http://b.localhost"+port; got != want {
		t.Errorf("SiteURLs = %q, want %q", got, want)
	}
	if _, err := Start(Config{Listen: "127.0.0.1:0", Admin: "off", DataDir: t.TempDir(), VHosts: true, Redirect: true}); err == nil {
		t.Fatal("--vhosts with redirect accepted")
	}
}

// TestStartProcsVHosts runs the sample sites on node processes behind the
// passfd path: each site answers by Host over handed-off connections.
func TestStartProcsVHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shoal binary")
	}
	exe := shoalBinary(t)
	logs, _ := os.CreateTemp(t.TempDir(), "nodes.log")
	defer logs.Close()
	p, err := StartProcs(Config{Listen: "127.0.0.1:0", Admin: "off", Nodes: 2, DataDir: t.TempDir(), VHosts: true,
		Policy: "lard", HealthInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		ProcsConfig{Path: "passfd", Exe: exe, Stderr: logs})
	if err != nil {
		t.Fatal(err)
	}
	shutdownAtEnd(t, p, 5*time.Second)
	waitSockets(t, p)
	checkSampleSites(t, p.URL, &http.Transport{DisableKeepAlives: true})
	if st := p.Front.Stats(); st.BytesOut != 0 {
		t.Errorf("front relayed %d bytes; passfd should hand every connection off", st.BytesOut)
	}
}

// checkSampleSites asks the front at url for every sample site's home page
// by Host (dialling the front whatever the name, through tr) and fails
// unless each answers 200 with a body and the two sites' pages differ.
func checkSampleSites(t *testing.T, url string, tr *http.Transport) {
	t.Helper()
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	body := map[string]string{}
	for _, host := range SampleSites {
		resp, err := client.Get("http://" + host + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(b) == 0 {
			t.Fatalf("%s: %d, %d bytes", host, resp.StatusCode, len(b))
		}
		body[host] = string(b)
	}
	if body["a.localhost"] == body["b.localhost"] {
		t.Fatal("both sites answered the same home page")
	}
}
