package up

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestUpVHosts starts the cluster with the two sample sites and fetches
// each site's home page and manifest through the front by Host name: both
// answer, with different content.
func TestUpVHosts(t *testing.T) {
	c, err := Start(Config{Listen: "127.0.0.1:0", Admin: "off", DataDir: t.TempDir(), Nodes: 2, CacheMB: 8, VHosts: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c.Shutdown(ctx)
	}()
	if !strings.Contains(c.SiteInfo, "a.localhost, b.localhost") {
		t.Fatalf("site info %q", c.SiteInfo)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(c.URL, "http://"), "/")
	// Dial the front whatever the name: the Host header picks the site.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
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
	if _, err := Start(Config{Listen: "127.0.0.1:0", Admin: "off", DataDir: t.TempDir(), VHosts: true, Redirect: true}); err == nil {
		t.Fatal("--vhosts with redirect accepted")
	}
}
