package up

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/content"
	"shoal/internal/cluster/policy"
	"shoal/internal/tools/loadgen"
	"shoal/internal/tools/sim"
)

// parityRequests is how many NASA trace records the parity test replays.
const parityRequests = 20000

// TestParityLiveVsSim checks the simulator's fidelity: the same trace through
// a live 4-node `shoal up` and through `shoal sim`, with the same cache
// sizes (2 MiB per node, gdsf, nothing above 500 KiB cached), the same
// concurrency (16 requests in the system, one connection each, as the
// simulator's HTTP/1.0 trace requests are), the same policy code and the
// same node names (the live nodes' URLs), for every policy on relay and
// passfd. Per-node request shares must agree
// within 10 percentage points and the live aggregate hit ratio must be
// within 10 % of the simulated one. The table goes to the log, and to the
// file named by SHOAL_PARITY_TABLE (docs/parity.md holds one). Slow (half
// a minute for relay, a minute for passfd, two for repair) and a load test,
// so it runs only with SHOAL_PARITY=1 (SHOAL_PARITY_PATHS picks the paths,
// default relay,passfd; repair needs root).
func TestParityLiveVsSim(t *testing.T) {
	if testing.Short() || os.Getenv("SHOAL_PARITY") == "" {
		t.Skip("a load test replaying a trace through 26 live clusters: set SHOAL_PARITY=1 (docs/parity.md)")
	}
	if _, err := os.Stat(nasa); err != nil {
		t.Skipf("NASA trace not found at %s: %v", nasa, err)
	}
	dataDir := t.TempDir()
	cfg := Config{Listen: "127.0.0.1:0", Admin: "off", DataDir: dataDir, Nodes: 4, CacheMB: 2, Cache: "gdsf",
		SiteFromTrace: nasa, HealthInterval: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := cfg.fill(); err != nil {
		t.Fatal(err)
	}
	root, _, err := prepareSite(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Site, cfg.SiteFromTrace = root, ""
	urls, accesses := parityWorkload(t, root)
	t.Logf("%d of the first %d trace requests name files of the site", len(urls), parityRequests)

	var rows []string
	paths := []string{"relay", "passfd"}
	if p := os.Getenv("SHOAL_PARITY_PATHS"); p != "" {
		paths = strings.Split(p, ",")
	}
	for _, path := range paths {
		for _, pol := range policy.Names() {
			liveReq, liveHit, names := parityLive(t, cfg, path, pol, urls)
			// The simulated nodes carry the live nodes' names (their URLs),
			// as the front's policy view does: chbl's ring hashes them.
			simRes, err := sim.Run(sim.Config{Policy: pol, Nodes: 4, NodeNames: names, CacheBytes: 2 << 20, Cache: "gdsf",
				PerNode: 4, PolicyConfig: policy.Config{PopularN: policy.DefaultConfig().PopularN}}, sim.NewSliceSource(accesses))
			if err != nil {
				t.Fatalf("sim %s: %v", pol, err)
			}
			simHit := 1 - simRes.MissRatio
			ls, ss := shares(liveReq), shares(simRes.NodeRequests)
			dShare := 0.0
			for i := range ls {
				dShare = max(dShare, math.Abs(ls[i]-ss[i]))
			}
			dHit := math.Abs(liveHit-simHit) / simHit * 100
			ok := dShare <= 10 && dHit <= 10
			verdict := "yes"
			if !ok {
				verdict = "**no**"
				t.Errorf("%s over %s: shares live %v sim %v (%.1f points apart), hit ratio live %.3f sim %.3f (%.1f %% apart)",
					pol, path, fmtShares(ls), fmtShares(ss), dShare, liveHit, simHit, dHit)
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %.1f | %.3f | %.3f | %.1f | %s |",
				pol, path, fmtShares(ls), fmtShares(ss), dShare, liveHit, simHit, dHit, verdict))
		}
	}
	table := "| policy | path | live shares % | sim shares % | max Δ (points) | live hit | sim hit | Δ hit % | within |\n" +
		"|---|---|---|---|---|---|---|---|---|\n" + strings.Join(rows, "\n") + "\n"
	t.Logf("\n%s", table)
	if out := os.Getenv("SHOAL_PARITY_TABLE"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// parityWorkload reads the first parityRequests GET records of the trace
// and keeps those naming a file of the site (the others cannot be served
// the same way live and simulated): the request targets for the live run
// and the same sequence with the files' sizes for the simulator.
func parityWorkload(t *testing.T, root string) ([]string, []sim.Access) {
	t.Helper()
	targets, err := loadgen.LoadTrace(nasa, "", parityRequests)
	if err != nil {
		t.Fatal(err)
	}
	st, err := content.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	var acc []sim.Access
	for _, u := range targets {
		e, err := st.Lookup(u)
		if err != nil || e.IsDir {
			continue
		}
		urls = append(urls, u)
		acc = append(acc, sim.Access{URL: u, Size: e.Size})
	}
	return urls, acc
}

// parityLive replays urls once, in order, on 16 one-request connections
// through a fresh cluster and returns each node's served requests, the
// aggregate hit ratio (the nodes' hit ratios weighted by their requests,
// shoal_cluster_cache_hit_ratio, plus the requests answered from a peer's
// memory) and the nodes' names in the front's policy view (their URLs).
func parityLive(t *testing.T, cfg Config, path, pol string, urls []string) ([]int64, float64, []string) {
	t.Helper()
	cfg.Policy = pol
	var c *Cluster
	switch path {
	case "relay":
		cl, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		c = cl
	case "repair":
		needLab(t)
		logs, err := os.CreateTemp(t.TempDir(), "cluster-*.log")
		if err != nil {
			t.Fatal(err)
		}
		defer logs.Close()
		cfg.Admin, cfg.AdminTokenFile, cfg.Listen, cfg.DataDir = "", "", "", t.TempDir()
		r, err := StartRepair(cfg, RepairConfig{Exe: shoalBinary(t), Stderr: logs})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		c = r.Cluster
	default:
		logs, err := os.CreateTemp(t.TempDir(), "nodes-*.log")
		if err != nil {
			t.Fatal(err)
		}
		defer logs.Close()
		p, err := StartProcs(cfg, ProcsConfig{Path: path, Exe: shoalBinary(t), Stderr: logs})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		waitSockets(t, p)
		c = p.Cluster
	}
	before := nodeRequests(t, c)
	r, err := loadgen.New(loadgen.Config{URL: strings.TrimSuffix(c.URL, "/"), Workload: loadgen.List(urls),
		Connections: 16, Requests: uint64(len(urls)), DisableKeepAlive: true, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.OK < uint64(len(urls))*99/100 {
		t.Errorf("%s over %s: %d of %d requests answered 2xx", pol, path, res.OK, len(urls))
	}
	served, _ := servedSince(t, c, before, int64(res.Requests))
	// A memory hit of the cluster is a request answered from a node's
	// memory, its own or (peer fetch) another's, as the simulator counts
	// it: the nodes' cache hits, less those that answered a peer's fetch,
	// plus the fetches (a fetch the owner read its disk for was its miss).
	var hits, reqs float64
	var names []string
	for _, n := range nodeInfos(t, c) {
		names = append(names, n.URL)
		if s := n.Status; s != nil {
			hits += float64(s.CacheHits)
			reqs += float64(s.Requests)
			if p := s.Peer; p != nil {
				hits += float64(p.Fetches+p.Collapsed) - float64(p.Served)
			}
		}
	}
	return served, hits / max(reqs, 1), names
}

// shares turns counts into percentages of their sum.
func shares(n []int64) []float64 {
	var sum int64
	for _, x := range n {
		sum += x
	}
	out := make([]float64, len(n))
	for i, x := range n {
		out[i] = 100 * float64(x) / float64(max(sum, 1))
	}
	return out
}

func fmtShares(s []float64) string {
	parts := make([]string, len(s))
	for i, x := range s {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, "/")
}
