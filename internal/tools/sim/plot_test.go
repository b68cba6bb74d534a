package sim

import (
	"path/filepath"
	"testing"

	"shoal/internal/testutil"
)

func TestPlotWritesSVGAndPNG(t *testing.T) {
	svg, png := PlotPaths(filepath.Join(t.TempDir(), "fig.svg"))
	if filepath.Ext(svg) != ".svg" || filepath.Ext(png) != ".png" {
		t.Fatalf("paths %s %s", svg, png)
	}
	rows := []Row{{Policy: "wrr", Nodes: 1, ThroughputRPS: 70, MissRatio: 0.36}, {Policy: "wrr", Nodes: 8, ThroughputRPS: 480, MissRatio: 0.37},
		{Policy: "lard", Nodes: 1, ThroughputRPS: 70, MissRatio: 0.36}, {Policy: "lard", Nodes: 8, ThroughputRPS: 1070, MissRatio: 0.13}}
	if err := Plot(rows, "(test)", svg, png); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFigure(t, svg, png, 512, "lard", "Cache miss ratio")
	if err := Plot(nil, "", svg, png); err == nil {
		t.Error("no rows: no error")
	}
}
