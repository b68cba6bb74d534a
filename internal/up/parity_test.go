package up

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/content"
	"shoal/internal/base/trace"
	"shoal/internal/cluster/policy"
	"shoal/internal/tools/loadgen"
	"shoal/internal/tools/sim"
)

// The long form's real traces, in shared/data/traces beside the checkout
// (SHOAL_TRACES names another folder): the NASA day and the EPA server's
// 30 August 1995 morning, a different site and month, never used to tune
// the simulator.
const (
	nasaFile = "nasa_aug95_19950801_fullday_derived.log.gz"
	epaFile  = "epa_http_0830_00-12h_learning-clojure.txt.gz"
)

// parityRequests is how many trace records the long parity test replays.
const parityRequests = 20000

// paritySmall is the short form's trace: the first records of the NASA day,
// kept in the repository so `go test ./...` checks parity on a clean clone.
const paritySmall = "testdata/parity-small.log.gz"

// parityCase is one trace the parity test replays.
type parityCase struct {
	Name  string // the table's trace column
	Path  string // the access log (CLF or EPA, plain or gzip)
	Limit int    // replay at most this many records (0 = all)
}

// parityRow is one policy on one path of one trace, live against simulated.
type parityRow struct {
	Trace, Policy, Path string
	Live, Sim           []float64 // per-node request shares, %
	DShare              float64   // the largest per-node gap, points
	LiveHit, SimHit     float64   // aggregate memory hit ratios
	DHit                float64   // |live − sim| / sim, %
}

// within reports whether the row is within the parity bounds: shares within
// 10 points, hit ratio within 10 %.
func (r parityRow) within() bool { return r.DShare <= 10 && r.DHit <= 10 }

// TestParityShort is the parity test's short form, run by `go test ./...`:
// the first records of the NASA day (testdata/parity-small.log.gz) through a
// live 4-node in-process cluster on the relay path and through the
// simulator, for a content-blind policy, a hashing one and a load-aware
// locality one; every row must be within the bounds and both sides must
// rank the same policy first (docs/parity.md). TestParityLiveVsSim is the
// long form.
func TestParityShort(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a small trace through three live clusters; skipped with -short")
	}
	rows := parityTrace(t, parityCase{Name: "nasa-small", Path: paritySmall}, []string{"relay"},
		[]string{"wrr", "urlhash", "lard"})
	checkParity(t, rows)
	t.Logf("\n%s", parityTable(rows))
}

// TestParityLiveVsSim checks the simulator's fidelity: each trace through a
// live 4-node `shoal up` and through `shoal sim`, with the same cache sizes
// (2 MiB per node, gdsf, nothing above 500 KiB cached), the same
// concurrency (16 requests in the system, one connection each, as the
// simulator's HTTP/1.0 trace requests are), the same policy code and the
// same node names (the live nodes' URLs), for every policy on relay and
// passfd, the simulator calibrated to each live run (paritySim). Per-node
// request shares must agree within 10 percentage points, the live hit
// ratio must be within 10 % of the simulated one, and on each trace and
// path both sides must rank the same policy first (rankParity).
//
// The traces: the NASA day and the EPA morning (the first 20,000 records
// of each), a synthetic Zipf workload, and the access log named by
// SHOAL_PARITY_TRACE (a user's own traffic). SHOAL_PARITY_TRACES picks
// among nasa, epa and zipf (default all; none: only SHOAL_PARITY_TRACE's),
// SHOAL_TRACES names the folder of the real traces when shared/ is not
// beside the checkout, SHOAL_PARITY_PATHS the paths (default relay,passfd;
// repair needs root) and SHOAL_PARITY_POLICIES the policies (default all).
// The tables go to the log, and to the file named by SHOAL_PARITY_TABLE
// (docs/parity.md holds them). A load test of a few minutes, so it runs
// only with SHOAL_PARITY=1; TestParityShort is its short form.
func TestParityLiveVsSim(t *testing.T) {
	if testing.Short() || os.Getenv("SHOAL_PARITY") == "" {
		t.Skip("a load test replaying traces through live clusters: set SHOAL_PARITY=1 (docs/parity.md)")
	}
	paths := envList("SHOAL_PARITY_PATHS", []string{"relay", "passfd"})
	pols := envList("SHOAL_PARITY_POLICIES", policy.Names())
	var rows []parityRow
	for _, pc := range parityCases(t) {
		start := time.Now()
		rows = append(rows, parityTrace(t, pc, paths, pols)...)
		t.Logf("%s: %v", pc.Name, time.Since(start).Round(time.Second))
	}
	checkParity(t, rows)
	table := parityTable(rows)
	t.Logf("\n%s", table)
	if out := os.Getenv("SHOAL_PARITY_TABLE"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// envList is the comma-separated list in the environment variable name, or
// def when it is unset.
func envList(name string, def []string) []string {
	if v := os.Getenv(name); v != "" {
		return strings.Split(v, ",")
	}
	return def
}

// parityCases lists the long form's traces: those of SHOAL_PARITY_TRACES
// that exist, and SHOAL_PARITY_TRACE's log.
func parityCases(t *testing.T) []parityCase {
	t.Helper()
	var out []parityCase
	for _, name := range envList("SHOAL_PARITY_TRACES", []string{"nasa", "epa", "zipf"}) {
		switch name {
		case "nasa", "epa":
			dir := cmp.Or(os.Getenv("SHOAL_TRACES"), filepath.Dir(nasa))
			p := filepath.Join(dir, map[string]string{"nasa": nasaFile, "epa": epaFile}[name])
			if _, err := os.Stat(p); err != nil {
				t.Logf("%s trace not found at %s (shared/ beside the checkout): skipped", name, p)
				continue
			}
			out = append(out, parityCase{Name: name, Path: p, Limit: parityRequests})
		case "zipf":
			out = append(out, parityCase{Name: "zipf", Path: zipfTrace(t)})
		case "none":
		default:
			t.Fatalf("SHOAL_PARITY_TRACES: unknown trace %q (want nasa, epa, zipf or none)", name)
		}
	}
	if p := os.Getenv("SHOAL_PARITY_TRACE"); p != "" {
		out = append(out, parityCase{Name: filepath.Base(p), Path: p, Limit: parityRequests})
	}
	if len(out) == 0 {
		t.Skip("no trace to replay")
	}
	return out
}

// zipfTrace writes a synthetic workload as a Common Log Format file and
// returns its path: 2,000 files of SURGE sizes (capped at 1 MiB) under
// Zipf(0.8) popularity, 15,000 requests.
func zipfTrace(t *testing.T) string {
	t.Helper()
	g, err := trace.Synth{Files: 2000, Requests: 15000, MaxSize: 1 << 20, Seed: 28}.New()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "zipf.log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	var line []byte
	for {
		rec, err := g.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		line = append(trace.AppendCLF(line[:0], rec), '\n')
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// parityCluster is the parity replays' cluster configuration (4 nodes
// with 2 MiB gdsf caches under policy, on the site made from pc's trace)
// and the trace's requests for that site, live (urls) and for the
// simulator.
func parityCluster(t *testing.T, pc parityCase, policy string) (Config, []string, []sim.Access) {
	t.Helper()
	cfg := Config{Listen: "127.0.0.1:0", Admin: "off", DataDir: t.TempDir(), Nodes: 4, CacheMB: 2, Cache: "gdsf",
		SiteFromTrace: pc.Path, HealthInterval: time.Second, Policy: policy,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := cfg.fill(); err != nil {
		t.Fatal(err)
	}
	root, _, err := prepareSite(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Site, cfg.SiteFromTrace = root, ""
	urls, accesses := parityWorkload(t, pc, root)
	return cfg, urls, accesses
}

// parityTrace replays one trace live and simulated for every path and
// policy and returns the rows.
func parityTrace(t *testing.T, pc parityCase, paths, pols []string) []parityRow {
	t.Helper()
	cfg, urls, accesses := parityCluster(t, pc, "")
	t.Logf("%s: %d of its first records name files of the site", pc.Name, len(urls))
	var rows []parityRow
	for _, path := range paths {
		for _, pol := range pols {
			live := parityLive(t, cfg, path, pol, urls)
			t.Logf("%s, %s over %s: %v live, node %v per request, %v in the system", pc.Name, pol, path,
				live.took.Round(time.Millisecond), live.measured.NodeBusy, live.measured.InSystem)
			simRes := paritySim(t, pol, live, accesses)
			r := parityRow{Trace: pc.Name, Policy: pol, Path: path, Live: shares(live.served), Sim: shares(simRes.NodeRequests),
				LiveHit: live.hit, SimHit: simRes.HitRatio}
			for i := range r.Live {
				r.DShare = max(r.DShare, math.Abs(r.Live[i]-r.Sim[i]))
			}
			r.DHit = math.Abs(r.LiveHit-r.SimHit) / r.SimHit * 100
			rows = append(rows, r)
		}
	}
	return rows
}

// paritySim runs the simulator as the live run it predicts: the same
// policy, cache and window, the live nodes' names (their URLs, which chbl's
// ring hashes, as the front's policy view does), the live front's data
// path (relay, passfd and repair are content-aware l7 fronts for every
// policy: the front reads the request and picks the node itself, and no
// node hands a connection on, where the simulator's default path for
// tbccrd and weblins charges node-to-node handoffs), and the live
// cluster's speed: the model's costs
// calibrated to the nodes' measured time per request and a request's
// measured time in the system (sim.Calibrate), so that the loads the
// policies read and their periods (weblins' popular set, dfwrr's feedback)
// follow the live ones.
func paritySim(t *testing.T, pol string, live parityLiveRun, acc []sim.Access) sim.Result {
	t.Helper()
	cfg := sim.Config{Policy: pol, Nodes: 4, NodeNames: live.names, CacheBytes: 2 << 20, Cache: "gdsf",
		PerNode: 4, PolicyConfig: policy.Config{PopularN: policy.DefaultConfig().PopularN}}
	cfg.Path = sim.PathL7
	costs, err := sim.Calibrate(cfg, func() sim.Source { return sim.NewSliceSource(acc) }, live.measured)
	if err != nil {
		t.Fatalf("sim %s: calibrate to %+v: %v", pol, live.measured, err)
	}
	cfg.Costs = &costs
	res, err := sim.Run(cfg, sim.NewSliceSource(acc))
	if err != nil {
		t.Fatalf("sim %s: %v", pol, err)
	}
	return res
}

// checkParity fails the test for every row out of bounds and for every
// trace and path on which the two sides rank different policies first.
func checkParity(t *testing.T, rows []parityRow) {
	t.Helper()
	for _, r := range rows {
		if !r.within() {
			t.Errorf("%s, %s over %s: shares live %s sim %s (%.1f points apart), hit ratio live %.3f sim %.3f (%.1f %% apart)",
				r.Trace, r.Policy, r.Path, fmtShares(r.Live), fmtShares(r.Sim), r.DShare, r.LiveHit, r.SimHit, r.DHit)
		}
	}
	for _, g := range rankParity(rows) {
		if !g.same() {
			t.Errorf("%s over %s: the live cluster ranks %s first (hit ratio %.3f; tied: %s), the simulator %s (%.3f; tied: %s)",
				g.Trace, g.Path, g.Live, g.LiveHit, strings.Join(g.LiveTied, ","), g.Sim, g.SimHit, strings.Join(g.SimTied, ","))
		}
	}
}

// parityTie is how close, relative to the best, a policy's hit ratio must
// be to share the first rank: policies that place every URL on one node
// (urlhash, lard, lardr, tbccrd) differ by less than that, which is less
// than one live run differs from the next.
const parityTie = 0.01

// parityRank is which policy each side ranks first on one trace and path,
// by hit ratio.
type parityRank struct {
	Trace, Path       string
	Live, Sim         string   // the first-ranked policies
	LiveHit, SimHit   float64  // their hit ratios, each on its own side
	LiveTied, SimTied []string // the policies within parityTie of the first, each side
}

// same reports whether the two sides agree on the best policy: each side's
// first is first, or tied with it, on the other side.
func (g parityRank) same() bool {
	return slices.Contains(g.LiveTied, g.Sim) && slices.Contains(g.SimTied, g.Live)
}

// rankParity ranks the policies of each trace and path by hit ratio on each
// side.
func rankParity(rows []parityRow) []parityRank {
	var out []parityRank
	for _, r := range rows {
		i := slices.IndexFunc(out, func(g parityRank) bool { return g.Trace == r.Trace && g.Path == r.Path })
		if i < 0 {
			out = append(out, parityRank{Trace: r.Trace, Path: r.Path, Live: r.Policy, Sim: r.Policy, LiveHit: r.LiveHit, SimHit: r.SimHit})
			continue
		}
		g := &out[i]
		if r.LiveHit > g.LiveHit {
			g.Live, g.LiveHit = r.Policy, r.LiveHit
		}
		if r.SimHit > g.SimHit {
			g.Sim, g.SimHit = r.Policy, r.SimHit
		}
	}
	for i := range out {
		g := &out[i]
		for _, r := range rows {
			if r.Trace != g.Trace || r.Path != g.Path {
				continue
			}
			if r.LiveHit >= g.LiveHit*(1-parityTie) {
				g.LiveTied = append(g.LiveTied, r.Policy)
			}
			if r.SimHit >= g.SimHit*(1-parityTie) {
				g.SimTied = append(g.SimTied, r.Policy)
			}
		}
	}
	return out
}

// parityTable renders the rows and the rankings as Markdown.
func parityTable(rows []parityRow) string {
	var b strings.Builder
	b.WriteString("| trace | policy | path | live shares % | sim shares % | max Δ (points) | live hit | sim hit | Δ hit % | within |\n" +
		"|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		verdict := "yes"
		if !r.within() {
			verdict = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.1f | %.3f | %.3f | %.1f | %s |\n", r.Trace, r.Policy, r.Path,
			fmtShares(r.Live), fmtShares(r.Sim), r.DShare, r.LiveHit, r.SimHit, r.DHit, verdict)
	}
	b.WriteString("\n| trace | path | live first (tied within 1 %) | sim first (tied within 1 %) | same |\n|---|---|---|---|---|\n")
	for _, g := range rankParity(rows) {
		same := "yes"
		if !g.same() {
			same = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s %.3f (%s) | %s %.3f (%s) | %s |\n", g.Trace, g.Path, g.Live, g.LiveHit,
			strings.Join(g.LiveTied, ", "), g.Sim, g.SimHit, strings.Join(g.SimTied, ", "), same)
	}
	return b.String()
}

// parityWorkload reads the case's first GET records and keeps those naming
// a file of the site (the others cannot be served the same way live and
// simulated): the request targets for the live run and the same sequence
// keyed by file, with the files' sizes, for the simulator.
func parityWorkload(t *testing.T, pc parityCase, root string) ([]string, []sim.Access) {
	t.Helper()
	targets, err := loadgen.LoadTrace(pc.Path, "", pc.Limit)
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
		// The simulator keys the request as `shoal sim` does
		// (sim.TraceSource): by the file it names, what the node caches
		// and the front's policies see (content.ObjectKey).
		k, ok := content.ObjectKey(u)
		if !ok || k != e.URL {
			t.Fatalf("%s: object key %q, %v; the node serves %q", u, k, ok, e.URL)
		}
		urls = append(urls, u)
		acc = append(acc, sim.Access{URL: k, Size: e.Size})
	}
	return urls, acc
}

// parityLiveRun is what a live replay measured.
type parityLiveRun struct {
	served []int64       // requests each node served
	hit    float64       // the cluster's memory hit ratio
	names  []string      // the nodes' names in the front's policy view
	took   time.Duration // the replay's wall time
	// measured is the nodes' mean time on a request and a request's time
	// in the system (16 in it, Little's law over the replay).
	measured sim.Measured
}

// parityLive replays urls once, in order, on 16 one-request connections
// through a fresh cluster and returns each node's served requests, the
// aggregate hit ratio (the nodes' hit ratios weighted by their requests,
// shoal_cluster_cache_hit_ratio, plus the requests answered from a peer's
// memory), the nodes' names in the front's policy view (their URLs) and
// the replay's wall time.
func parityLive(t *testing.T, cfg Config, path, pol string, urls []string) parityLiveRun {
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
	before, busyBefore := nodeRequests(t, c), nodesBusy(t, c)
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
	served, total := servedSince(t, c, before, int64(res.Requests))
	busy := nodesBusy(t, c) - busyBefore
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
	return parityLiveRun{served: served, hit: hits / max(reqs, 1), names: names, took: res.Duration,
		measured: sim.Measured{NodeBusy: busy / time.Duration(max(total, 1)),
			InSystem: 16 * res.Duration / time.Duration(max(res.Requests, 1))}}
}

// nodesBusy is the nodes' summed time answering requests, from their last
// status reports.
func nodesBusy(t *testing.T, c *Cluster) time.Duration {
	t.Helper()
	var sum time.Duration
	for _, n := range nodeInfos(t, c) {
		if n.Status != nil {
			sum += time.Duration(n.Status.BusyNanos)
		}
	}
	return sum
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
