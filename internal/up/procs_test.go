package up

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStartProcs builds the shoal binary, starts a front with two node
// processes on the passfd path, and checks that requests are answered by
// the nodes over handed-off connections, and that Shutdown stops the nodes.
func TestStartProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shoal binary")
	}
	site := t.TempDir()
	body := bytes.Repeat([]byte("shoal "), 50000)
	os.WriteFile(filepath.Join(site, "big.txt"), body, 0o644)
	p := startProcs(t, Config{Listen: "127.0.0.1:0", Admin: "off", Nodes: 2, Site: site, Policy: "wrr",
		HealthInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, "passfd")
	waitSockets(t, p)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	for range 6 {
		resp, err := client.Get(p.URL + "big.txt")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("body: %d bytes, %v", len(got), err)
		}
	}
	// The front counts a pass after the send, which can be after the node
	// answered: wait for the count (bounded) before comparing.
	st := p.Front.Stats()
	for end := time.Now().Add(5 * time.Second); st.Handoff.Passed < 6 && time.Now().Before(end); st = p.Front.Stats() {
		time.Sleep(10 * time.Millisecond)
	}
	if st.Handoff.Passed != 6 || st.BytesOut != 0 {
		t.Errorf("front: passed %d (want 6), bytes out %d (want 0)", st.Handoff.Passed, st.BytesOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.Shutdown(ctx)
	for i, sv := range p.children {
		if !sv.exited() {
			t.Errorf("node %d still running after Shutdown", i)
		}
	}
	if _, err := os.Stat(p.SocketDir); !os.IsNotExist(err) {
		t.Errorf("socket folder left: %v", err)
	}
}

// startProcs starts cfg with node processes of the built shoal binary on
// path, their stderr in a temporary file; the cluster is closed when the
// test ends.
func startProcs(t *testing.T, cfg Config, path string) *Procs {
	t.Helper()
	logs, err := os.CreateTemp(t.TempDir(), "nodes-*.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	p, err := StartProcs(cfg, ProcsConfig{Path: path, Exe: shoalBinary(t), Stderr: logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
