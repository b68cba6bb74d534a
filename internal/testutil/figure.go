package testutil

import (
	"os"
	"strings"
	"testing"
)

// CheckFigure fails the test unless the SVG and PNG files a figure writer
// made each start like their format (the magic within the first within
// bytes: an SVG may open with an XML prolog) and the SVG holds every text
// (titles, legends) the figure must show.
func CheckFigure(t testing.TB, svg, png string, within int, texts ...string) {
	t.Helper()
	for path, magic := range map[string]string{svg: "<svg", png: "\x89PNG"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b[:min(len(b), within)]), magic) {
			t.Errorf("%s does not start like its format (%q)", path, magic)
		}
	}
	b, _ := os.ReadFile(svg)
	for _, s := range texts {
		if !strings.Contains(string(b), s) {
			t.Errorf("%s lacks %q", svg, s)
		}
	}
}
