package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg" // registers the png format
	_ "gonum.org/v1/plot/vg/vgsvg" // registers the svg format
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
	var nodeTicks plot.ConstantTicks
	seen := map[int]bool{}
	for _, r := range rows {
		if !seen[r.Nodes] {
			seen[r.Nodes] = true
			nodeTicks = append(nodeTicks, plot.Tick{Value: float64(r.Nodes), Label: strconv.Itoa(r.Nodes)})
		}
	}
	// Legends go where the curves are not: top left for throughput (curves
	// rise to the right), bottom left for miss ratio (they fall to the right).
	panel := func(name, ylabel string, data map[string]plotter.XYs, top bool) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = name
		p.X.Label.Text = "Number of back-end servers"
		p.Y.Label.Text = ylabel
		p.Y.Min = 0
		p.Legend.Top, p.Legend.Left = top, true
		p.Legend.XOffs = vg.Inch / 4
		p.X.Tick.Marker = nodeTicks
		p.Y.Tick.Marker = plainTicks{}
		args := make([]any, 0, 2*len(order))
		for _, pol := range order {
			args = append(args, pol, data[pol])
		}
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return nil, err
		}
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
	for _, out := range []struct{ path, format string }{{svgPath, "svg"}, {pngPath, "png"}} {
		if out.path == "" {
			continue
		}
		c, err := draw.NewFormattedCanvas(12*vg.Inch, 4.5*vg.Inch, out.format)
		if err != nil {
			return fmt.Errorf("plot %s: %w", out.path, err)
		}
		dc := draw.New(c)
		tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 4, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8,
			PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8}
		tp.Draw(tiles.At(dc, 0, 0))
		mp.Draw(tiles.At(dc, 1, 0))
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
