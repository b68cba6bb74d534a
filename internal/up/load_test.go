package up

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"shoal/internal/tools/loadgen"
)

// TestUpNodesReportTheirOwnLoad: in `shoal up` every node shares the
// front's process, so its CPU figure is the whole process's and says
// nothing of the node (two nodes once showed 1.061 and 1.061). Each
// node must report a load of its own: with requests sent to node 0 alone,
// node 0's load as the front sees it is above node 1's, and both say that
// they share their process.
func TestUpNodesReportTheirOwnLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	dir := t.TempDir()
	urls := uniformSite(t, filepath.Join(dir, "site"), 16, 256<<10)
	c, err := Start(Config{Listen: "127.0.0.1:0", Admin: "off", Nodes: 2, Site: filepath.Join(dir, "site"),
		Policy: "dfwrr", HealthInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := loadgen.New(loadgen.Config{URL: c.NodeURLs[0], Workload: loadgen.List(urls), Connections: 4,
		Duration: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	// Sample while the load runs: the reports cover the last interval.
	var loaded, idle float64
	var shared [2]bool
	for deadline := time.Now().Add(1400 * time.Millisecond); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ns := c.Control.Nodes()
		loaded, idle = max(loaded, ns[0].Load), max(idle, ns[1].Load)
		for i := range 2 {
			if ns[i].Status != nil {
				shared[i] = ns[i].Status.SharedProcess
			}
		}
	}
	cancel()
	<-done
	t.Logf("highest load seen: node 0 (loaded) %.3f, node 1 (idle) %.3f", loaded, idle)
	if !(loaded > idle) || loaded == 0 {
		t.Errorf("node 0 (loaded) load %.3f, node 1 (idle) %.3f: want node 0's above", loaded, idle)
	}
	if !shared[0] || !shared[1] {
		t.Errorf("shared_process %v, want both true in shoal up", shared)
	}
}
