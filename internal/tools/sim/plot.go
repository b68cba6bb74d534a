package sim

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"shoal/internal/base/figure"
)

// PlotPaths returns the SVG and PNG file names for a --plot argument: the
// name with its extension replaced by .svg and .png ("out.svg" → out.svg,
// out.png; "out" → out.svg, out.png).
func PlotPaths(name string) (svg, png string) {
	base := strings.TrimSuffix(name, filepath.Ext(name))
	return base + ".svg", base + ".png"
}

// Plot draws seed 000's Figs. 4–5 from rows: two panels side by side, left
// throughput (requests/s) and right cache miss ratio (%), both against the
// node count, one line per policy in the rows' order. It writes the same
// figure as SVG to svgPath and PNG to pngPath.
func Plot(rows []Row, title, svgPath, pngPath string) error {
	var order []string
	byPolicy := map[string]plotter.XYs{}
	miss := map[string]plotter.XYs{}
	for _, r := range rows {
		if _, ok := byPolicy[r.Policy]; !ok {
			order = append(order, r.Policy)
		}
		byPolicy[r.Policy] = append(byPolicy[r.Policy], plotter.XY{X: float64(r.Nodes), Y: r.ThroughputRPS})
		miss[r.Policy] = append(miss[r.Policy], plotter.XY{X: float64(r.Nodes), Y: 100 * r.MissRatio})
	}
	if len(order) == 0 {
		return fmt.Errorf("plot: no rows")
	}
	nodes := make([]int, len(rows))
	for i, r := range rows {
		nodes[i] = r.Nodes
	}
	nodeTicks := figure.Ticks(nodes)
	// Legends go where the curves are not: top left for throughput (curves
	// rise to the right), bottom left for miss ratio (they fall to the right).
	panel := func(name, ylabel string, data map[string]plotter.XYs, top bool) (*plot.Plot, error) {
		args := make([]any, 0, 2*len(order))
		for _, pol := range order {
			args = append(args, pol, data[pol])
		}
		p, err := figure.Panel(name, "Number of back-end servers", ylabel, nodeTicks, args...)
		if err != nil {
			return nil, err
		}
		p.Y.Min = 0
		p.Legend.Top, p.Legend.Left = top, true
		p.Legend.XOffs = vg.Inch / 4
		p.Y.Tick.Marker = plainTicks{}
		return p, nil
	}
	tp, err := panel("Throughput "+title, "Throughput (req/s)", byPolicy, true)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	mp, err := panel("Cache miss ratio "+title, "Cache miss ratio (%)", miss, false)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return figure.Write(svgPath, pngPath, 6*vg.Inch, tp, mp)
}

// plainTicks are gonum's default ticks labelled without trailing zeros
// ("2500", not "2500.00").
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}
