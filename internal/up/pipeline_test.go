package up

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/tools/loadgen"
)

// TestUpPipelinesToNodes: through `shoal up`, concurrent requests for
// small files share node connections: the front's /metrics counts heads
// that went in another request's write, and every request is answered
// with its file (the load generator counts the bytes).
func TestUpPipelinesToNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	dir := t.TempDir()
	const size = 2 << 10
	urls := uniformSite(t, filepath.Join(dir, "site"), 32, size)
	c, err := Start(Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", Nodes: 2, Site: filepath.Join(dir, "site"),
		Policy: "lard", HealthInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := loadgen.New(loadgen.Config{URL: strings.TrimSuffix(c.URL, "/"), Workload: loadgen.List(urls),
		Connections: 32, Duration: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.OK != res.Requests || res.BodyBytes != int64(res.Requests)*size {
		t.Fatalf("%d requests, %d ok, %d body bytes: want every one answered with its %d bytes", res.Requests, res.OK, res.BodyBytes, size)
	}
	piped := scrape(t, c.AdminURL+"/metrics", `shoal_front_node_head_batches_total{what="piped"}`)
	if piped == 0 {
		t.Fatalf("no request was pipelined in %d", res.Requests)
	}
	t.Logf("%d requests, %v of them pipelined", res.Requests, piped)
}
