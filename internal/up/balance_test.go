package up

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/cluster/control"
	"shoal/internal/testutil"
	"shoal/internal/tools/loadgen"
)

// uniformSite writes n files of size bytes each (f000.bin …) under dir and
// returns their URLs: a workload in which every node is equally able to serve
// every request, so a fair policy splits it evenly.
func uniformSite(t *testing.T, dir string, n, size int) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var urls []string
	for i := range n {
		name := fmt.Sprintf("f%03d.bin", i)
		if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte{byte('a' + i%26)}, size), 0o644); err != nil {
			t.Fatal(err)
		}
		urls = append(urls, "/"+name)
	}
	return urls
}

// nodeRequests reads every node's own request count from its last status
// report (what the node served, including keep-alive requests the front
// never saw under passfd), through the admin API when the front is a
// process of its own (repair).
func nodeRequests(t *testing.T, c *Cluster) []int64 {
	t.Helper()
	var out []int64
	for _, n := range nodeInfos(t, c) {
		var r int64
		if n.Status != nil {
			r = n.Status.Requests
		}
		out = append(out, r)
	}
	return out
}

// servedSince waits (up to 10 s) until the nodes' reports include want
// requests since before (a nodeRequests reading), and returns each node's
// requests since then and their total: the nodes report with a delay.
func servedSince(t *testing.T, c *Cluster, before []int64, want int64) (served []int64, total int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		served, total = nodeRequests(t, c), 0
		for i := range served {
			served[i] -= before[i]
			total += served[i]
		}
		if total >= want || time.Now().After(deadline) {
			return served, total
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nodeInfos returns the front's view of the nodes, through the admin API
// when the front is a process of its own (repair).
func nodeInfos(t *testing.T, c *Cluster) []control.NodeInfo {
	t.Helper()
	nodes, err := fetchNodeInfos(c)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// fetchNodeInfos is nodeInfos for goroutines other than the test's.
func fetchNodeInfos(c *Cluster) ([]control.NodeInfo, error) {
	if c.Control != nil {
		return c.Control.Nodes(), nil
	}
	req, err := http.NewRequest("GET", c.AdminURL+"/nodes", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var nodes []control.NodeInfo
	if err := json.NewDecoder(resp.Body).Decode(&nodes); err != nil {
		return nil, fmt.Errorf("admin /nodes: %w", err)
	}
	return nodes, nil
}

// blind lists the content-blind policies among those tested: they leave a
// keep-alive connection with its node to its end, so their clients open a
// connection per request here (otherwise the shares measure how fast each
// node process happens to be scheduled, not the policy); content-aware
// ones get keep-alive connections, which nodes hand back after every
// request.
var blind = map[string]bool{"lc": true, "wlc": true, "p2c": true}

// keepAlive reports whether checkSpread's clients reuse connections for pol
// over path: not for the blind policies, and not on the repair path, where
// a node serves a moved connection to its end whatever the policy (lard's
// 32 keep-alive connections were placed once, and the shares were how fast
// each node served its 8: up to 38 % under two CPU hogs).
func keepAlive(pol, path string) bool { return !blind[pol] && path != "repair" }

// spreadRequests is how many requests checkSpread replays, and the number
// of files of the spread tests' sites (spreadSite), so that every request
// is its URL's first. A content-aware policy (lard, lardr) places a URL
// once, at its first request: a site of 256 URLs replayed in order had them
// all placed in the first few percent of the run, tens of milliseconds in
// which a node process the scheduler left waiting holds most connections,
// takes few new URLs and keeps that share to the end (under two CPU hogs a
// node served up to 47 % with lard, 68 % with lardr). One placement per
// request, over a run long enough for such stalls to fall on every node,
// measures the policy's load-aware choice itself, as for lc.
const spreadRequests = 12000

// spreadSite is uniformSite for the spread tests: n files of size bytes,
// all hard links to one (so 12000 files of 128 KiB cost one), whose URLs
// are returned in order.
func spreadSite(t *testing.T, dir string, n, size int) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(dir, "f0000.bin")
	if err := os.WriteFile(first, bytes.Repeat([]byte{'a'}, size), 0o644); err != nil {
		t.Fatal(err)
	}
	urls := []string{"/f0000.bin"}
	for i := 1; i < n; i++ {
		name := fmt.Sprintf("f%04d.bin", i)
		if err := os.Link(first, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		urls = append(urls, "/"+name)
	}
	return urls
}

// checkSpread replays urls uniformly (32 connections, spreadRequests)
// through c's front and checks the load-aware choice itself: sampled every
// 10 ms, no node may carry more than 40 % of the connections the front
// counts against the nodes (Active: in flight plus handed-off ones not yet
// ended), every node must serve at least 2.5 % of the requests, and on the
// handoff paths the front must have counted a handed-off connection against
// its node (Held) at least once.
//
// The requests' shares are logged, not bounded: four node processes on two
// shared cores are not equal servers. A node the scheduler favours ends its
// connections sooner, so a load-aware policy rightly gives it more (under
// other test packages or three CPU hogs one node served 41–76 % with every
// policy, while the connections in progress stayed balanced). What the
// policies control is the load in progress, so that is what is bounded; a
// hold that leaks, a policy that ignores load or a node left out breaks it,
// and holds released at the send leave Held at 0.
func checkSpread(t *testing.T, c *Cluster, pol, path string, urls []string) {
	t.Helper()
	before := nodeRequests(t, c)
	r, err := loadgen.New(loadgen.Config{URL: strings.TrimSuffix(c.URL, "/"), Workload: loadgen.List(urls),
		Connections: 32, Requests: spreadRequests, DisableKeepAlive: !keepAlive(pol, path)})
	if err != nil {
		t.Fatal(err)
	}
	stop, sampled := make(chan struct{}), make(chan spreadSample)
	go sampleActive(c, stop, sampled)
	res, err := r.Run(context.Background())
	close(stop)
	smp := <-sampled
	if err != nil {
		t.Fatal(err)
	}
	if path != "relay" && smp.mostHeld == 0 {
		t.Errorf("%s over %s: the front never counted a handed-off connection against its node (Held 0 throughout)", pol, path)
	}
	if res.OK < res.Requests || res.Requests < spreadRequests {
		t.Fatalf("%d requests answered, %d ok (want %d ok); errors by kind %v", res.Requests, res.OK, spreadRequests, res.Errors)
	}
	served, total := servedSince(t, c, before, int64(res.Requests))
	var load int64
	for _, a := range smp.active {
		load += a
	}
	t.Logf("%s over %s: per-node requests %v of %d; connections in progress summed over %d samples %v; at most %d held",
		pol, path, served, total, smp.n, smp.active, smp.mostHeld)
	for i, a := range smp.active {
		if load > 0 && a*100 > load*40 {
			t.Errorf("%s over %s: node %d carried %.1f %% of the connections in progress (want at most 40 %%)",
				pol, path, i, 100*float64(a)/float64(load))
		}
	}
	for i, n := range served {
		if total > 0 && n*1000 < total*25 {
			t.Errorf("%s over %s: node %d served %d of %d requests (want at least 2.5 %%)", pol, path, i, n, total)
		}
	}
}

// spreadSample is what sampleActive saw: each node's Active summed over n
// samples, and the most connections held at once.
type spreadSample struct {
	active   []int64
	n        int
	mostHeld int
}

// sampleActive reads the front's view of the nodes every 10 ms until stop
// closes, then sends what it saw. A failed read counts nothing.
func sampleActive(c *Cluster, stop <-chan struct{}, out chan<- spreadSample) {
	var s spreadSample
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			out <- s
			return
		case <-tick.C:
			nodes, _ := fetchNodeInfos(c)
			held := 0
			for i, n := range nodes {
				for len(s.active) <= i {
					s.active = append(s.active, 0)
				}
				s.active[i] += int64(n.Active)
				held += n.Held
			}
			if len(nodes) > 0 {
				s.n++
			}
			s.mostHeld = max(s.mostHeld, held)
		}
	}
}

// TestLoadAwareSpreadsUnderPassFD checks load on every path: four
// equal node processes behind a passfd (and a hybrid) front, a uniform
// workload, and for each load-aware policy no node may serve more than 40 %
// of the requests. A connection handed to a node must stay counted against
// it until the node reports its end (hand-back or FIN-HANDOFF); released at
// the send, every node looks idle and lc, wlc, lard and lardr send
// everything to node 0.
func TestLoadAwareSpreadsUnderPassFD(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shoal binary and starts node processes")
	}
	if testutil.RaceEnabled {
		t.Skip("measures load distribution, which the race detector's slowdown of the front distorts")
	}
	shoalBinary(t) // built once, before the subtests
	dir := t.TempDir()
	urls := spreadSite(t, filepath.Join(dir, "site"), spreadRequests, 4<<10)
	// Hybrid hands off objects of 100 KiB and more (and relays the rest,
	// which is relay's balance, not the handoff's): its site has 128 KiB
	// files, whose sizes the front learns from the nodes' index.
	bigURLs := spreadSite(t, filepath.Join(dir, "big"), spreadRequests, 128<<10)
	for _, path := range []string{"passfd", "hybrid"} {
		for _, pol := range []string{"lc", "wlc", "lard", "lardr", "p2c", "chbl"} {
			if path == "hybrid" && pol != "lc" && pol != "lard" {
				continue // hybrid's handoffs are passfd's: two policies suffice
			}
			t.Run(path+"/"+pol, func(t *testing.T) {
				site, us := filepath.Join(dir, "site"), urls
				if path == "hybrid" {
					site, us = filepath.Join(dir, "big"), bigURLs
				}
				p := startProcs(t, Config{Listen: "127.0.0.1:0", Admin: "off", Nodes: 4, Site: site,
					Policy: pol, HealthInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, path)
				waitSockets(t, p)
				if path == "hybrid" {
					waitSizes(t, p.Cluster, us[0], 128<<10)
				}
				checkSpread(t, p.Cluster, pol, path, us)
				if h := p.Front.Stats().Handoff; path == "hybrid" && h.HybridSize == 0 {
					t.Errorf("hybrid handed nothing off by size: %+v", h)
				}
			})
		}
	}
}

// TestLoadAwareSpreadsUnderRepair is the same check on the repair path
// (root only: it builds a network-namespace lab); a moved connection stays
// counted until the node's FIN-HANDOFF.
func TestLoadAwareSpreadsUnderRepair(t *testing.T) {
	needLab(t)
	if testutil.RaceEnabled {
		t.Skip("measures load distribution, which the race detector's slowdown distorts")
	}
	exe := shoalBinary(t)
	dir := t.TempDir()
	urls := spreadSite(t, filepath.Join(dir, "site"), spreadRequests, 4<<10)
	for _, pol := range []string{"lc", "p2c", "lard"} {
		t.Run(pol, func(t *testing.T) {
			logs, err := os.CreateTemp(dir, "cluster-*.log")
			if err != nil {
				t.Fatal(err)
			}
			defer logs.Close()
			r, err := StartRepair(Config{DataDir: filepath.Join(dir, pol), Site: filepath.Join(dir, "site"), Nodes: 4,
				Policy: pol, HealthInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
				RepairConfig{Exe: exe, Stderr: logs})
			if err != nil {
				b, _ := os.ReadFile(logs.Name())
				t.Fatalf("%v\nlogs:\n%s", err, b)
			}
			defer r.Close()
			checkSpread(t, r.Cluster, pol, "repair", urls)
		})
	}
}
