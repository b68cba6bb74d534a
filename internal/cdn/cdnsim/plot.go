package cdnsim

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"shoal/internal/base/figure"
)

// Plot draws three panels against the number of PoPs (log scale): the
// clients' mean RTT per view with the oracle and random PoP, the view's
// staleness, and its traffic in bytes per second. It writes SVG to svgPath
// and PNG to pngPath (either may be "").
func Plot(rows []Result, svgPath, pngPath string) error {
	if len(rows) == 0 {
		return fmt.Errorf("plot: no rows")
	}
	series := func(f func(Result) float64, view string) plotter.XYs {
		var xy plotter.XYs
		for _, r := range rows {
			if view == "" || r.View == view {
				xy = append(xy, plotter.XY{X: float64(r.PoPs), Y: f(r)})
			}
		}
		return xy
	}
	views := []string{}
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.View] {
			seen[r.View] = true
			views = append(views, r.View)
		}
	}
	pops := make([]int, len(rows))
	for i, r := range rows {
		pops[i] = r.PoPs
	}
	ticks := figure.Ticks(pops)
	panel := func(title, ylabel string, args ...any) (*plot.Plot, error) {
		p, err := figure.Panel(title, "PoPs", ylabel, ticks, args...)
		if err != nil {
			return nil, err
		}
		p.X.Scale = plot.LogScale{}
		return p, nil
	}
	var rtt, stale, bytes []any
	for _, v := range views {
		rtt = append(rtt, "clients ("+v+")", series(func(r Result) float64 { return r.ClientRTTMean }, v))
		stale = append(stale, v, series(func(r Result) float64 { return r.ViewStalenessS }, v))
		bytes = append(bytes, v, series(func(r Result) float64 { return r.ViewBytesPerS }, v))
	}
	first := views[0]
	rtt = append(rtt, "oracle", series(func(r Result) float64 { return r.OracleRTTMean }, first),
		"random PoP", series(func(r Result) float64 { return r.RandomRTTMean }, first))
	p1, err := panel("Client RTT", "mean RTT (ms)", rtt...)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	p2, err := panel("View staleness when routing", "mean age (s)", stale...)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	p3, err := panel("View traffic", "bytes/s (all PoPs)", bytes...)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	p3.Y.Scale = plot.LogScale{}
	p3.Y.Tick.Marker = plot.LogTicks{}
	return figure.Write(svgPath, pngPath, 5*vg.Inch, p1, p2, p3)
}
