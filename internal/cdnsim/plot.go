package cdnsim

import (
	"fmt"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg" // registers the png format
	_ "gonum.org/v1/plot/vg/vgsvg" // registers the svg format
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
	var ticks plot.ConstantTicks
	tk := map[int]bool{}
	for _, r := range rows {
		if !tk[r.PoPs] {
			tk[r.PoPs] = true
			ticks = append(ticks, plot.Tick{Value: float64(r.PoPs), Label: strconv.Itoa(r.PoPs)})
		}
	}
	panel := func(title, ylabel string, args ...any) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "PoPs"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = ticks
		p.Y.Label.Text = ylabel
		p.Legend.Top = true
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return nil, err
		}
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
	for _, out := range []struct{ path, format string }{{svgPath, "svg"}, {pngPath, "png"}} {
		if out.path == "" {
			continue
		}
		c, err := draw.NewFormattedCanvas(15*vg.Inch, 4.5*vg.Inch, out.format)
		if err != nil {
			return fmt.Errorf("plot %s: %w", out.path, err)
		}
		dc := draw.New(c)
		tiles := draw.Tiles{Rows: 1, Cols: 3, PadX: vg.Inch / 4, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8,
			PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8}
		p1.Draw(tiles.At(dc, 0, 0))
		p2.Draw(tiles.At(dc, 1, 0))
		p3.Draw(tiles.At(dc, 2, 0))
		f, err := os.Create(out.path)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		if _, err := c.WriteTo(f); err != nil {
			f.Close()
			return fmt.Errorf("plot %s: %w", out.path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("plot %s: %w", out.path, err)
		}
	}
	return nil
}
