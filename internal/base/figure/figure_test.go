package figure

import (
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"shoal/internal/testutil"
)

func TestTicks(t *testing.T) {
	got := Ticks([]int{4, 8, 4, 16, 8})
	want := []plot.Tick{{Value: 4, Label: "4"}, {Value: 8, Label: "8"}, {Value: 16, Label: "16"}}
	if len(got) != len(want) {
		t.Fatalf("ticks %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("tick %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestWriteSVGAndPNG(t *testing.T) {
	dir := t.TempDir()
	svg, png := filepath.Join(dir, "f.svg"), filepath.Join(dir, "f.png")
	var panels []*plot.Plot
	for _, title := range []string{"Left panel", "Right panel"} {
		p, err := Panel(title, "x", "y", Ticks([]int{1, 2}), "curve", plotter.XYs{{X: 1, Y: 1}, {X: 2, Y: 3}})
		if err != nil {
			t.Fatal(err)
		}
		panels = append(panels, p)
	}
	if err := Write(svg, png, 4*vg.Inch, panels...); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFigure(t, svg, png, 200, "Left panel", "Right panel")
	if err := Write(filepath.Join(dir, "missing", "f.svg"), "", 4*vg.Inch, panels...); err == nil {
		t.Error("Write into a missing directory returned nil")
	}
}
