package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"shoal/internal/base/trace"
	"shoal/internal/cdn/cdnsim"
	"shoal/internal/cdn/scenario"
	"shoal/internal/tools/sim"
)

func runSimCDN(args []string) error {
	d := cdnsim.DefaultConfig()
	fs := newFlags("sim cdn", "[--rtt-matrix FILE [--rtt-cols SRC,DST,RTT_MS] | --cities N] [--trace FILE | --zipf-requests N] [--pops 10,100] [--views mbpp,gossip] [--json] [--plot out.svg]",
		"Simulate the CDN tier (MBPP view, Chord directory, replication) on a virtual clock over a latency matrix; one row per PoP count and view")
	matrixPath := fs.String("rtt-matrix", "", "RTT matrix CSV (plain or gzip): one row per pair, upper triangle allowed")
	rttCols := fs.String("rtt-cols", "", "columns SRC,DST,RTT_MS by header name or 1-based number (default: the first three)")
	citiesN := fs.Int("cities", 100, "without --rtt-matrix: generate a matrix of this many locations (--topology)")
	topology := fs.String("topology", "cities", "generated matrix: cities (great-circle RTT between city coordinates, the first 100 real cities, more scattered around them) or transit-stub (shortest paths through a GT-ITM-style hierarchy of transit and stub domains: an independent second model)")
	inflation := fs.Float64("inflation", cdnsim.DefaultGenConfig(0).Inflation, "generated matrix: RTT = base + inflation × great-circle km / 100 (fibre 200 km/ms, paths ≈ 2× longer)")
	baseMs := fs.Float64("rtt-base-ms", cdnsim.DefaultGenConfig(0).BaseMs, "generated matrix: access delay added to every pair (and the RTT within a location)")
	tracePath := fs.String("trace", "", "access log (CLF or EPA, plain or gzip); clients placed at locations by a seeded hash of their host")
	zipfN := fs.Int("zipf-requests", 100000, "without --trace: a Zipf workload of this many requests")
	zipfFiles := fs.Int("zipf-files", 10000, "Zipf workload: distinct objects")
	zipfClients := fs.Int("zipf-clients", 5000, "Zipf workload: distinct clients")
	zipfRate := fs.Float64("zipf-rate", 10, "Zipf workload: requests per second")
	duration := fs.Duration("duration", 0, "replay only this much of the workload (0 = all)")
	popsFlag := fs.String("pops", "10,100", "comma-separated PoP counts")
	views := fs.String("views", "mbpp,gossip", "view protocols to run: mbpp (the PoPs' token ring, as shoal pop runs it) and/or gossip (baseline)")
	ring := fs.String("mbpp-ring", d.Ring, "MBPP ring order: hash (as shoal pop orders it) or geo (nearest-neighbour tour of locations; shorter rounds at large N)")
	estimate := fs.Bool("mbpp-estimate-rtt", d.MBPP.EstimateRTT, "MBPP ranks a PoP it has not measured by an RTT estimated through the links the view publishes (off: the seed's algorithm, no link performance)")
	redirect := fs.Bool("redirect", d.Redirect, "a PoP that misses sends the client (HTTP 302) to a holder scoring above it, as shoal pop --redirect does")
	stretch := fs.Float64("shield-stretch", d.CDN.ShieldStretch, "a miss nobody holds goes through the key's home when self→home→origin ≤ this × self→origin (0: always)")
	nearer := fs.Bool("nearer-origin", d.CDN.NearerOrigin, "a miss skips the holders farther than the origin")
	routeCost := fs.Bool("route-cost", d.RouteCost, "a miss also pays what a live PoP's miss spends before its fetch (Chord lookup, directory query) and TCP handshakes over connections not kept (as --scenario does; the oracle and random RTTs pay none of it)")
	learnOrigin := fs.Bool("learn-origin", d.LearnOrigin, "a PoP knows its distance to the origin, and the home's, only from its own fetches, as a live PoP does (false: every PoP knows the matrix's distances from the start)")
	chordRTT := fs.Bool("chord-rtt", d.ChordRTT, "MBPP also samples the RTT of Chord connections (false: ring neighbours and probes only)")
	origin := fs.String("origin", d.Origin, "location of the origin server")
	killAt := fs.Float64("kill-at", d.KillAt, "fraction of the workload at which one PoP fails (0 = none)")
	window := fs.Duration("window", d.CDN.Window, "replication window: evict below --min-requests, push the --hot-top")
	minReq := fs.Int("min-requests", d.CDN.MinRequests, "M: fewer requests than this in a window evict a copy")
	hotTop := fs.Int("hot-top", d.CDN.HotTop, "objects of a window pushed to every PoP (0 = no hot push)")
	hold := fs.Duration("mbpp-hold", d.MBPP.Hold, "MBPP token hold time (sets the round: N × (hold + one-way delay))")
	gossipPeriod := fs.Duration("gossip-period", d.Gossip.Period, "gossip baseline period")
	cacheControl := fs.String("cache-control", "", "the origin's Cache-Control per class of URLs, WEIGHT:VALUE joined by |, e.g. \"70:max-age=3600|20:max-age=60, stale-while-revalidate=30|10:no-store\" (each URL drawn into a class by a seeded hash; default: fresh for a year)")
	seed := fs.Uint64("seed", d.Seed, "seed of placement, client locations and draws; equal seeds give identical output")
	asJSON := fs.Bool("json", false, "print one JSON object per run (one per line)")
	scenarioPath := fs.String("scenario", "", "a scenario file (internal/cdn/scenario: PoPs, client sites, delay matrix, workload), the WAN lab's: sets the matrix, the PoPs' places, the origin, the workload and --redirect, and prints the rows the lab measures")
	plotOut := fs.String("plot", "", "write the client RTT, staleness and traffic plots against N to NAME.svg and NAME.png")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *scenarioPath != "" {
		return runSimScenario(*scenarioPath, *asJSON, *seed)
	}
	mix := d.CacheControl
	if *cacheControl != "" {
		var err error
		if mix, err = cdnsim.ParseCacheControlMix(*cacheControl); err != nil {
			return fmt.Errorf("--cache-control: %w", err)
		}
	}
	g := cdnsim.DefaultGenConfig(*citiesN)
	g.Inflation, g.BaseMs, g.Seed = *inflation, *baseMs, *seed
	m, err := simMatrix(*matrixPath, *rttCols, *topology, g)
	if err != nil {
		return err
	}
	w, err := simWorkload(*tracePath, m.Len(), *seed, *duration,
		trace.Synth{Files: *zipfFiles, Requests: *zipfN, Rate: *zipfRate, Seed: int64(*seed)}, *zipfClients)
	if err != nil {
		return err
	}
	pops, err := popCounts(*popsFlag, m.Len())
	if err != nil {
		return err
	}
	tmpl := cdnsim.DefaultConfig()
	tmpl.Ring, tmpl.ChordRTT = *ring, *chordRTT
	tmpl.Origin, tmpl.KillAt, tmpl.Seed = *origin, *killAt, *seed
	tmpl.CDN.Window, tmpl.CDN.MinRequests, tmpl.CDN.HotTop = *window, *minReq, *hotTop
	tmpl.CDN.DirTTL = max(tmpl.CDN.DirTTL, 2**window)
	tmpl.MBPP.Hold, tmpl.Gossip.Period, tmpl.MBPP.EstimateRTT, tmpl.Redirect = *hold, *gossipPeriod, *estimate, *redirect
	tmpl.CDN.ShieldStretch, tmpl.CDN.NearerOrigin, tmpl.RouteCost, tmpl.LearnOrigin = *stretch, *nearer, *routeCost, *learnOrigin
	tmpl.CacheControl = mix
	rows, err := simCDNRows(tmpl, pops, splitList(*views), m, w, *asJSON)
	if err != nil {
		return err
	}
	if *plotOut != "" {
		svg, png := sim.PlotPaths(*plotOut)
		if err := cdnsim.Plot(rows, svg, png); err != nil {
			return err
		}
	}
	if len(rows) == 0 {
		return errors.New("no run: --pops and --views are empty")
	}
	return nil
}

// simCDNRows runs the simulation once per PoP count and view, each with
// tmpl's settings, printing a table row (or a JSON line) per run.
func simCDNRows(tmpl cdnsim.Config, pops []int, views []string, m *cdnsim.Matrix, w *cdnsim.Workload, asJSON bool) ([]cdnsim.Result, error) {
	var rows []cdnsim.Result
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	if !asJSON {
		fmt.Fprintln(tw, "view\tpops\trequests\tround_s\tstale_s\tbytes/round\tmsgs/round\tview_B/s\thops\thops_p99\tdetect_s\tclient_ms\toracle_ms\trandom_ms\thit\torigin\twall_s\t")
	}
	defer tw.Flush()
	for _, n := range pops {
		for _, v := range views {
			cfg := tmpl
			cfg.PoPs, cfg.View = n, v
			r, err := cdnsim.Run(cfg, m, w)
			if err != nil {
				return rows, err
			}
			rows = append(rows, r)
			if asJSON {
				b, _ := json.Marshal(r)
				fmt.Println(string(b))
				continue
			}
			simRow(tw, r)
		}
	}
	return rows, nil
}

// simRow prints one run as a row of the table.
func simRow(w io.Writer, r cdnsim.Result) {
	fmt.Fprintf(w, "%s\t%d\t%d\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.2f\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.3f\t%.3f\t%.1f\t\n",
		r.View, r.PoPs, r.Requests, r.MBPPRoundS, r.ViewStalenessS, r.MBPPBytesRound, r.MBPPMsgsRound, r.ViewBytesPerS,
		r.ChordHopsMean, r.ChordHopsP99, r.FailureDetectS, r.ClientRTTMean, r.OracleRTTMean, r.RandomRTTMean,
		r.HitRatio, r.OriginFetchRatio, r.WallS)
}

// simMatrix loads the --rtt-matrix file, or generates the --topology's
// matrix (g's location count and seed for either model).
func simMatrix(path, cols, topology string, g cdnsim.GenConfig) (*cdnsim.Matrix, error) {
	switch {
	case path != "":
		c, err := cdnsim.ParseColumns(cols)
		if err != nil {
			return nil, err
		}
		return cdnsim.LoadMatrix(path, c)
	case topology == "cities":
		return cdnsim.Generate(g)
	case topology == "transit-stub":
		ts := cdnsim.DefaultTransitStubConfig(g.Locations)
		ts.Seed = g.Seed
		return cdnsim.TransitStub(ts)
	}
	return nil, fmt.Errorf("--topology %q: want cities or transit-stub", topology)
}

// simWorkload reads the trace at path (placing clients over locs
// locations), or makes the Zipf workload z for clients clients.
func simWorkload(path string, locs int, seed uint64, duration time.Duration, z trace.Synth, clients int) (*cdnsim.Workload, error) {
	if path == "" {
		return cdnsim.Zipf(z, clients, locs, seed)
	}
	r, err := trace.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return cdnsim.FromSource(r, locs, seed, duration)
}

// popCounts parses --pops: PoP counts in [1, locs].
func popCounts(list string, locs int) ([]int, error) {
	var pops []int
	for _, s := range splitList(list) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > locs {
			return nil, fmt.Errorf("--pops: %q is not a PoP count in [1, %d] (the matrix's locations)", s, locs)
		}
		pops = append(pops, n)
	}
	return pops, nil
}

// runSimScenario runs the scenario file at path on the simulator with
// its defaults (the live PoPs' defaults), as the WAN lab runs it, and
// prints the rows the lab compares: client RTT, hit and origin ratios,
// PoP-to-PoP bytes, and each site's PoP.
func runSimScenario(path string, asJSON bool, seed uint64) error {
	sc, err := scenario.Load(path)
	if err != nil {
		return err
	}
	m, err := sc.Matrix()
	if err != nil {
		return err
	}
	w, err := sc.BuildWorkload()
	if err != nil {
		return err
	}
	cfg := sc.SimConfig()
	cfg.Seed = seed
	r, err := cdnsim.Run(cfg, m, w)
	if err != nil {
		return err
	}
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "requests\t%d\t\nclient_rtt_ms_mean\t%.1f\t\nhit_ratio\t%.3f\t\norigin_fetch_ratio\t%.3f\t\npeer_bytes\t%d\t\n",
		r.Requests, r.ClientRTTMean, r.HitRatio, r.OriginFetchRatio, r.PeerBytes)
	for _, x := range sc.Sites {
		fmt.Fprintf(tw, "pop of %s\t%s\t\n", x.Name, r.Ingress[x.Name])
	}
	return tw.Flush()
}
