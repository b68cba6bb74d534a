package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"shoal/internal/base/store"
	"shoal/internal/base/trace"
	"shoal/internal/cluster/policy"
	"shoal/internal/tools/sim"
)

func init() {
	register("sim", "trace-driven cluster simulator: throughput and miss ratio per policy and node count", runSim)
}

// simFlags are the flags of `shoal sim`.
type simFlags struct {
	tracePath, policies, nodes, cachePol, gdsfCost, front, costsFile, plotOut *string
	cacheMB, timeScale                                                        *float64
	replicas, popularN, perNode, parallel, connReqs                           *int
	seed                                                                      *uint64
	digestPeriod                                                              *time.Duration
	asJSON, asCSV                                                             *bool
	// memory is each node's memory (--memory), the cache planned from it.
	memory sizeFlag
	// costFields are the --cost.* flags, bound to a cost model of their own.
	costFields []sim.CostField
}

func addSimFlags(fs *flag.FlagSet) *simFlags {
	sf := &simFlags{
		tracePath:    fs.String("trace", "", "access log to replay (CLF or EPA, plain or gzip)"),
		policies:     fs.String("policies", "wrr,lard,lardr,tbccrd,weblins", "comma-separated policies (any of "+strings.Join(policy.Names(), ",")+")"),
		nodes:        fs.String("nodes", "1,2,4,8,16", "comma-separated node counts"),
		cacheMB:      fs.Float64("cache-mb", 32, "memory cache per node, MiB"),
		replicas:     fs.Int("replicas", 0, "nodes that store each file on disk (partitioned storage, as shoal up --replicas); the others fetch it from a holder; 0 = every node"),
		cachePol:     fs.String("cache", "lru", "node cache replacement: lru, gdsf or cgdsf"),
		digestPeriod: fs.Duration("digest-period", 0, "cgdsf: the nodes' cache digests are rebuilt every this much virtual time (0 = the nodes' default, 2s; negative = read the other caches exactly)"),
		gdsfCost:     fs.String("gdsf-cost", "node", "gdsf/cgdsf cost C: node (the live nodes': a disk read and its transfer, 1 + size/41666, or a tenth when cached elsewhere) or disk (the model's disk read time, or a peer fetch's)"),
		popularN:     fs.Int("popular-n", 0, "weblins: the replicated popular set is this many files, as on a live front (default 0: the files that fill an eighth of a node's cache)"),
		seed:         fs.Uint64("seed", 1, "seed of the policies' randomness (p2c); equal seeds give identical output"),
		front:        fs.String("front", "auto", "front data path: auto (by policy), l4, l7 (alias relay; cost T1) or tag (TB-CCRD, cost T2)"),
		connReqs:     fs.Int("conn-requests", 0, "consecutive requests per keep-alive client connection (0 or 1: one connection per request, as HTTP/1.0 traces); later requests start on their predecessor's node and a decision for another node moves the connection (moves_per_request)"),
		perNode:      fs.Int("per-node", 0, "throughput mode: requests in the system per node (0: LARD's admission bound S = (n-1)*T_high + T_low - 1 for the whole cluster)"),
		timeScale:    fs.Float64("time-scale", 0, "latency mode: replay at trace timestamps × this factor (0 = throughput mode)"),
		costsFile:    fs.String("costs", "", "TOML file overriding cost-model fields (keys as the --cost.* flags)"),
		parallel:     fs.Int("parallel", 0, "concurrent runs (0 = GOMAXPROCS); output does not depend on it"),
		asJSON:       fs.Bool("json", false, "print the rows as a JSON array on stdout"),
		asCSV:        fs.Bool("csv", false, "print the rows as CSV on stdout"),
		plotOut:      fs.String("plot", "", "write throughput and miss-ratio plots (two panels) to NAME.svg and NAME.png"),
	}
	fs.Var(&sf.memory, "memory", "each node's memory (e.g. 36MiB, as its cgroup's limit): the cache is what a live node plans from it, its own overhead left out (instead of --cache-mb)")
	flagCosts := sim.DefaultCosts()
	sf.costFields = flagCosts.Fields()
	for _, f := range sf.costFields {
		if f.Dur != nil {
			fs.DurationVar(f.Dur, "cost."+f.Name, *f.Dur, f.Usage)
		} else {
			fs.Int64Var(f.Int, "cost."+f.Name, *f.Int, f.Usage)
		}
	}
	return sf
}

func runSim(args []string) error {
	if len(args) > 0 && args[0] == "cdn" {
		return runSimCDN(args[1:])
	}
	fs := newFlags("sim", "--trace FILE [--policies wrr,lard,…] [--nodes 1,2,4,8,16] [--cache-mb N] [--cache lru|gdsf|cgdsf] [--seed S] [--json | --csv] [--plot out.svg]",
		"Replay an access log through a simulated cluster (node CPU, disk and cache; front cost) for every policy and node count; print one row per run")
	sf := addSimFlags(fs)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *sf.tracePath == "" {
		fs.Usage()
		return errors.New("--trace is required")
	}
	if *sf.asJSON && *sf.asCSV {
		return errors.New("--json and --csv are exclusive")
	}
	pols, nodes, err := sf.sweepLists()
	if err != nil {
		return err
	}
	base, err := sf.config(fs)
	if err != nil {
		return err
	}
	sizes, err := trace.Sizes(*sf.tracePath)
	if err != nil {
		return err
	}
	sizes = sim.ObjectSizes(sizes) // one file, one object, as the nodes cache it
	if *sf.replicas < 0 {
		return fmt.Errorf("--replicas %d: want 0 (every node) or a count of nodes", *sf.replicas)
	}
	if *sf.popularN < 0 {
		return fmt.Errorf("--popular-n %d: must not be negative", *sf.popularN)
	}
	var skipped atomic.Int64 // the same in every run
	sw := sim.Sweep{Base: base, Policies: pols, Nodes: nodes, Parallel: *sf.parallel,
		Open: func() (sim.Source, error) {
			r, err := trace.Open(*sf.tracePath)
			if err != nil {
				return nil, err
			}
			return &closingSource{TraceSource: sim.NewTraceSource(r, sizes), r: r, skipped: &skipped}, nil
		}}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		bar := progressbar.NewOptions(len(pols)*len(nodes), progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("simulating"), progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish())
		var mu sync.Mutex
		sw.RunDone = func() {
			mu.Lock()
			bar.Add(1)
			mu.Unlock()
		}
		defer bar.Finish()
	}
	ctx, cancel := interruptible()
	defer cancel()
	start := time.Now()
	results, err := sw.Run(ctx)
	if err != nil {
		return err
	}
	return sf.report(results, len(nodes), skipped.Load(), time.Since(start))
}

// sweepLists are the policies and node counts to sweep.
func (sf *simFlags) sweepLists() ([]string, []int, error) {
	pols := splitList(*sf.policies)
	for _, p := range pols {
		if _, err := policy.New(p, policy.Config{}); err != nil {
			return nil, nil, err
		}
	}
	var nodes []int
	for _, s := range splitList(*sf.nodes) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 4096 {
			return nil, nil, fmt.Errorf("--nodes: %q is not a node count in [1, 4096]", s)
		}
		nodes = append(nodes, n)
	}
	if len(pols) == 0 || len(nodes) == 0 {
		return nil, nil, errors.New("need at least one policy and one node count")
	}
	return pols, nodes, nil
}

// config is every run's configuration but the policy and node count.
// Costs: defaults, then the TOML file, then flags given explicitly.
func (sf *simFlags) config(fs *flag.FlagSet) (sim.Config, error) {
	if *sf.cacheMB <= 0 {
		return sim.Config{}, fmt.Errorf("--cache-mb %v: must be positive", *sf.cacheMB)
	}
	switch *sf.cachePol {
	case "lru", "gdsf", "cgdsf":
	default:
		return sim.Config{}, fmt.Errorf("--cache %q: want lru, gdsf or cgdsf", *sf.cachePol)
	}
	gdsfCost := *sf.gdsfCost
	switch gdsfCost {
	case "node":
		gdsfCost = sim.GDSFNode
	case sim.GDSFDisk:
	default:
		return sim.Config{}, fmt.Errorf("--gdsf-cost %q: want node or disk", gdsfCost)
	}
	path, err := sim.ParsePath(*sf.front)
	if err != nil {
		return sim.Config{}, err
	}
	costs := sim.DefaultCosts()
	if *sf.costsFile != "" {
		if costs, err = sim.LoadCosts(*sf.costsFile, costs); err != nil {
			return sim.Config{}, err
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for i, f := range costs.Fields() {
		if !set["cost."+f.Name] {
			continue
		}
		if f.Dur != nil {
			*f.Dur = *sf.costFields[i].Dur
		} else {
			*f.Int = *sf.costFields[i].Int
		}
	}
	if err := costs.Validate(); err != nil {
		return sim.Config{}, err
	}
	base := sim.Config{CacheBytes: int64(*sf.cacheMB * (1 << 20)), MemoryBytes: sf.memory.n, Cache: *sf.cachePol, DigestPeriod: *sf.digestPeriod,
		GDSFCost: gdsfCost, Costs: &costs, Path: path, PerNode: *sf.perNode, TimeScale: *sf.timeScale, Seed: *sf.seed, Replicas: *sf.replicas,
		ConnRequests: *sf.connReqs}
	if sf.memory.set {
		base.CacheBytes = 0 // planned from MemoryBytes
	}
	base.PolicyConfig.PopularN = *sf.popularN
	return base, nil
}

// report prints the rows as asked (table, JSON or CSV) and writes the plot.
func (sf *simFlags) report(results []sim.Result, nNodes int, skipped int64, took time.Duration) error {
	rows := sim.Rows(results)
	switch {
	case *sf.asJSON:
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return err
		}
	case *sf.asCSV:
		if err := writeSimCSV(os.Stdout, rows); err != nil {
			return err
		}
	default:
		writeSimTable(os.Stdout, rows)
		fmt.Printf("\n%s: %d requests replayed per run (%d skipped: URL never answered 200, no size); %.4g MiB cache per node (%s); simulated in %v\n",
			*sf.tracePath, rows[0].Requests, skipped, sf.cachePerNodeMB(), *sf.cachePol, took.Round(time.Millisecond))
		if *sf.timeScale == 0 {
			fmt.Printf("throughput mode: %s requests in the system at %s nodes\n", simWindows(results, nNodes), *sf.nodes)
		}
	}
	if *sf.plotOut != "" {
		svg, png := sim.PlotPaths(*sf.plotOut)
		title := fmt.Sprintf("(%.4g MiB/node, %s)", sf.cachePerNodeMB(), *sf.cachePol)
		if err := sim.Plot(rows, title, svg, png); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s and %s\n", svg, png)
	}
	return nil
}

// closingSource lets the sweep close each run's trace file, and reports how
// many records had no object size.
type closingSource struct {
	*sim.TraceSource
	r       *trace.Reader
	skipped *atomic.Int64
}

func (c *closingSource) Close() error {
	c.skipped.Store(c.Skipped())
	return c.r.Close()
}

// simWindows lists the throughput-mode windows of the first policy's runs,
// one per node count ("24/219/479").
func simWindows(results []sim.Result, nodes int) string {
	w := make([]string, 0, nodes)
	for _, r := range results[:min(nodes, len(results))] {
		w = append(w, strconv.Itoa(r.Window))
	}
	return strings.Join(w, "/")
}

// splitList splits a comma-separated flag value into its trimmed, non-empty
// elements (nil for none), as every list flag of the commands reads them.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// simColumn is one column of `shoal sim`'s output: its CSV name, its
// label in the table, and its value. One list serves the table and the
// CSV, so labels and values cannot drift apart.
type simColumn struct {
	csv, label string
	value      func(r sim.Row) string
}

// fixed formats v with prec decimals.
func fixed(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

var simColumns = []simColumn{
	{"policy", "policy", func(r sim.Row) string { return r.Policy }},
	{"nodes", "nodes", func(r sim.Row) string { return strconv.Itoa(r.Nodes) }},
	{"requests", "requests", func(r sim.Row) string { return strconv.FormatInt(r.Requests, 10) }},
	{"throughput_rps", "req/s", func(r sim.Row) string { return fixed(r.ThroughputRPS, 1) }},
	{"miss_ratio", "miss", func(r sim.Row) string { return fixed(r.MissRatio, 4) }},
	{"byte_miss_ratio", "byte miss", func(r sim.Row) string { return fixed(r.ByteMissRatio, 4) }},
	{"node_cpu_util", "node cpu", func(r sim.Row) string { return fixed(r.NodeCPUUtil, 3) }},
	{"node_disk_util", "node disk", func(r sim.Row) string { return fixed(r.NodeDiskUtil, 3) }},
	{"front_cpu_util", "front cpu", func(r sim.Row) string { return fixed(r.FrontCPUUtil, 3) }},
	{"handoffs_per_request", "handoffs/req", func(r sim.Row) string { return fixed(r.HandoffsPerRequest, 3) }},
	{"internal_bytes_per_request", "internal B/req", func(r sim.Row) string { return fixed(r.InternalBytesPerRequest, 1) }},
	{"mean_latency_ms", "latency ms", func(r sim.Row) string { return fixed(r.MeanLatencyMS, 2) }},
	{"hit_ratio", "hit", func(r sim.Row) string { return fixed(r.HitRatio, 4) }},
	{"byte_hit_ratio", "byte hit", func(r sim.Row) string { return fixed(r.ByteHitRatio, 4) }},
	{"fetch_bytes_per_request", "peer fetch B/req", func(r sim.Row) string { return fixed(r.FetchBytesPerRequest, 1) }},
	{"moves_per_request", "moves/req", func(r sim.Row) string { return fixed(r.MovesPerRequest, 3) }},
}

// simRecord is r's values in simColumns' order.
func simRecord(r sim.Row) []string {
	out := make([]string, len(simColumns))
	for i, c := range simColumns {
		out[i] = c.value(r)
	}
	return out
}

// simHeader is the columns' CSV names (csv true) or table labels.
func simHeader(csv bool) []string {
	out := make([]string, len(simColumns))
	for i, c := range simColumns {
		out[i] = c.label
		if csv {
			out[i] = c.csv
		}
	}
	return out
}

func writeSimCSV(w io.Writer, rows []sim.Row) error {
	cw := csv.NewWriter(w)
	cw.Write(simHeader(true))
	for _, r := range rows {
		cw.Write(simRecord(r))
	}
	cw.Flush()
	return cw.Error()
}

func writeSimTable(w io.Writer, rows []sim.Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(simHeader(false), "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(simRecord(r), "\t")+"\t")
	}
	tw.Flush()
}

// cachePerNodeMB is the cache per node the simulator runs with, in MiB:
// planned from --memory when given (store.PlanMemory, as a live node
// plans it), else --cache-mb.
func (sf *simFlags) cachePerNodeMB() float64 {
	if sf.memory.set {
		return float64(store.PlanMemory(sf.memory.n, "", 1).Store) / (1 << 20)
	}
	return *sf.cacheMB
}
