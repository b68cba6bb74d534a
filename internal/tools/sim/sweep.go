package sim

import (
	"context"
	"fmt"
	"runtime"

	"golang.org/x/sync/errgroup"
)

// Sweep runs Base once per (policy, node count): the experiment of seed 000
// Figs. 4–5. Runs are independent simulations, so they may run on several
// goroutines; each writes only its own slot, so the rows' order and values do
// not depend on scheduling.
type Sweep struct {
	// Base is the configuration shared by all runs; Policy and Nodes are set
	// per run.
	Base Config
	// Policies and Nodes span the grid; rows come policy-major, in the given
	// orders.
	Policies []string
	Nodes    []int
	// Open returns a fresh Source over the whole workload for one run (each
	// run streams the trace again, so memory does not grow with its length).
	Open func() (Source, error)
	// Parallel bounds the concurrent runs. Default GOMAXPROCS.
	Parallel int
	// RunDone, if set, is called (from any goroutine, serialised by the
	// caller's own means) after each run; for progress bars.
	RunDone func()
}

// Run executes the sweep and returns one Result per (policy, nodes), in order.
func (sw Sweep) Run(ctx context.Context) ([]Result, error) {
	if len(sw.Policies) == 0 || len(sw.Nodes) == 0 {
		return nil, fmt.Errorf("sim: sweep needs at least one policy and one node count")
	}
	if sw.Open == nil {
		return nil, fmt.Errorf("sim: sweep has no workload")
	}
	out := make([]Result, len(sw.Policies)*len(sw.Nodes))
	g, ctx := errgroup.WithContext(ctx)
	par := sw.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	g.SetLimit(par)
	for pi, p := range sw.Policies {
		for ni, n := range sw.Nodes {
			k := pi*len(sw.Nodes) + ni
			g.Go(func() error {
				if err := ctx.Err(); err != nil {
					return err
				}
				src, err := sw.Open()
				if err != nil {
					return err
				}
				if c, ok := src.(interface{ Close() error }); ok {
					defer c.Close()
				}
				cfg := sw.Base
				cfg.Policy, cfg.Nodes = p, n
				res, err := Run(cfg, src)
				if err != nil {
					return fmt.Errorf("%s on %d nodes: %w", p, n, err)
				}
				out[k] = res
				if sw.RunDone != nil {
					sw.RunDone()
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// Rows extracts the table rows of results.
func Rows(results []Result) []Row {
	rows := make([]Row, len(results))
	for i, r := range results {
		rows[i] = r.Row
	}
	return rows
}
