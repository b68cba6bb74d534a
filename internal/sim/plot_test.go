package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
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
	for path, magic := range map[string][]byte{svg: []byte("<svg"), png: []byte("\x89PNG")} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b[:min(len(b), 512)], magic) {
			t.Errorf("%s does not look like %q", path, magic)
		}
		if path == svg && (!bytes.Contains(b, []byte("lard")) || !bytes.Contains(b, []byte("Cache miss ratio"))) {
			t.Errorf("%s lacks the legend or the miss-ratio panel", path)
		}
	}
	if err := Plot(nil, "", svg, png); err == nil {
		t.Error("no rows: no error")
	}
}
