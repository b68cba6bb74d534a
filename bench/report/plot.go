package main

import (
	"errors"
	"fmt"
	"image/color"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// sizeColors fill the bars of the first, second, … object size of a group.
var sizeColors = []color.Color{
	color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff},
	color.RGBA{R: 0xdd, G: 0x84, B: 0x52, A: 0xff},
	color.RGBA{R: 0x55, G: 0xa8, B: 0x68, A: 0xff},
	color.RGBA{R: 0x81, G: 0x72, B: 0xb3, A: 0xff},
	color.RGBA{R: 0x93, G: 0x78, B: 0x60, A: 0xff},
}

// barWidth is the width of one bar; one bar is one unit on the X axis, so
// the canvas width follows the number of bars (see Plot).
const barWidth = 18 * vg.Millimeter / 2

// bar is one drawn bar: its X position in data units and its row.
type bar struct {
	x   float64
	row Row
}

// layout places every row on the X axis: comparisons in first-seen order,
// within one the sizes in the order they first appear in the report, one
// empty slot between comparisons. It returns the bars, the group centres
// (tick positions) with their labels, and the size order.
func layout(rows []Row) (bars []bar, ticks []plot.Tick, sizes []string) {
	sizeIdx := map[string]int{}
	var comps []string
	byComp := map[string][]Row{}
	for _, r := range rows {
		if _, ok := sizeIdx[r.Size]; !ok {
			sizeIdx[r.Size] = len(sizes)
			sizes = append(sizes, r.Size)
		}
		if _, ok := byComp[r.Comparison]; !ok {
			comps = append(comps, r.Comparison)
		}
		byComp[r.Comparison] = append(byComp[r.Comparison], r)
	}
	x := 0.0
	for _, c := range comps {
		g := byComp[c]
		first := x
		for _, r := range g {
			bars = append(bars, bar{x: x, row: r})
			x++
		}
		ticks = append(ticks, plot.Tick{Value: (first + x - 1) / 2, Label: tickLabel(g[0].Label())})
		x++ // gap
	}
	return bars, ticks, sizes
}

// tickLabel breaks a long comparison label into lines at ": " and ", " so
// that neighbouring groups' labels do not overlap.
func tickLabel(s string) string {
	return strings.NewReplacer(": ", ":\n", ", ", "\n").Replace(s)
}

// errPoints adapts bars to plotter.XYer + YErrorer: the whisker of a bar
// runs from the minimum to the maximum per-run ratio around the median.
type errPoints []bar

func (e errPoints) Len() int                { return len(e) }
func (e errPoints) XY(i int) (x, y float64) { return e[i].x, e[i].row.Ratio.Median }
func (e errPoints) YError(i int) (float64, float64) {
	r := e[i].row.Ratio
	return r.Median - r.Min, r.Max - r.Median
}

// Plot draws grouped bars of the median ratio per comparison and size with
// min–max whiskers and a dashed line at 1 (parity with the peer), and saves
// it to each of outs; the format follows the extension (.svg, .png, .pdf).
func Plot(rep *Report, outs ...string) error {
	if len(rep.Rows) == 0 {
		return errors.New("plot: no rows")
	}
	bars, ticks, sizes := layout(rep.Rows)
	p := plot.New()
	p.Title.Text = "shoal ÷ peer req/s (front CPU rows: relay ÷ handoff CPU per request); median of paired runs, whiskers min–max"
	if d := rep.Meta["date"]; d != "" {
		p.Title.Text += "\n" + d
		if l := rep.Meta["loadavg_before"]; l != "" {
			p.Title.Text += ", load average " + l
		}
	}
	p.Y.Label.Text = "ratio (> 1 favours shoal)"
	p.Y.Min = 0
	// Headroom above the highest whisker for the legend (top right).
	for _, r := range rep.Rows {
		p.Y.Max = max(p.Y.Max, 1.3*r.Ratio.Max)
	}
	p.X.Min, p.X.Max = -1, bars[len(bars)-1].x+1
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Top = true
	p.Add(plotter.NewGrid())

	for si, size := range sizes {
		first := true
		for _, b := range bars {
			if b.row.Size != size {
				continue
			}
			bc, err := plotter.NewBarChart(plotter.Values{b.row.Ratio.Median}, barWidth)
			if err != nil {
				return fmt.Errorf("plot: bar %s %s: %w", b.row.Comparison, size, err)
			}
			bc.XMin = b.x
			bc.Color = sizeColors[si%len(sizeColors)]
			bc.LineStyle.Width = 0
			p.Add(bc)
			if first {
				p.Legend.Add(size, bc)
				first = false
			}
		}
	}
	eb, err := plotter.NewYErrorBars(errPoints(bars))
	if err != nil {
		return fmt.Errorf("plot: whiskers: %w", err)
	}
	eb.LineStyle.Width = vg.Points(1.2)
	p.Add(eb)
	one, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: 1}, {X: p.X.Max, Y: 1}})
	if err != nil {
		return fmt.Errorf("plot: parity line: %w", err)
	}
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	one.Color = color.Gray{Y: 0x40}
	p.Add(one)

	w := vg.Length(len(bars)+len(ticks)+1)*barWidth*1.6 + 30*vg.Millimeter
	if w < 160*vg.Millimeter {
		w = 160 * vg.Millimeter
	}
	for _, out := range outs {
		switch filepath.Ext(out) {
		case ".svg", ".png", ".pdf":
		default:
			return fmt.Errorf("plot: %s: unknown format (want .svg, .png or .pdf)", out)
		}
		if err := p.Save(w, 110*vg.Millimeter, out); err != nil {
			return fmt.Errorf("plot: save %s: %w", out, err)
		}
	}
	return nil
}
