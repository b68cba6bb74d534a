// Package figure draws the line-chart figures of the simulators (shoal sim
// --plot, seed 000 Figs. 4–5; shoal sim cdn --plot): panels side by side,
// written as the same picture in SVG and PNG. Both simulators had their own
// copy of this drawing and writing code; it lives here once so the two
// figures look alike and a fix to one reaches both.
package figure

import (
	"fmt"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg" // registers the png format
	_ "gonum.org/v1/plot/vg/vgsvg" // registers the svg format
)

// Height is the height of every figure; a panel is as wide as the caller
// says.
const Height = 4.5 * vg.Inch

// Ticks returns one tick per distinct value of xs, labelled with the
// integer, in the order first seen: the x axis shows exactly the measured
// points (node or PoP counts), not round numbers between them.
func Ticks(xs []int) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	seen := map[int]bool{}
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			ticks = append(ticks, plot.Tick{Value: float64(x), Label: strconv.Itoa(x)})
		}
	}
	return ticks
}

// Panel returns a plot titled title with the given axis labels and x ticks,
// the legend at the top, and one line with points per (name, plotter.XYs)
// pair of lines, as plotutil.AddLinePoints takes them.
func Panel(title, xlabel, ylabel string, xticks plot.Ticker, lines ...any) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.X.Tick.Marker = xticks
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return nil, fmt.Errorf("panel %q: %w", title, err)
	}
	return p, nil
}

// Write draws panels side by side, each panelWidth wide, and writes the
// figure as SVG to svgPath and as PNG to pngPath; an empty path is skipped.
func Write(svgPath, pngPath string, panelWidth vg.Length, panels ...*plot.Plot) error {
	for _, out := range []struct{ path, format string }{{svgPath, "svg"}, {pngPath, "png"}} {
		if out.path == "" {
			continue
		}
		c, err := draw.NewFormattedCanvas(vg.Length(len(panels))*panelWidth, Height, out.format)
		if err != nil {
			return fmt.Errorf("plot %s: %w", out.path, err)
		}
		dc := draw.New(c)
		tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Inch / 4, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8,
			PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8}
		for i, p := range panels {
			p.Draw(tiles.At(dc, i, 0))
		}
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
