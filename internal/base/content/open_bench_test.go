package content_test

import (
	"testing"

	"shoal/internal/base/content"
	"shoal/internal/tools/site"
)

// BenchmarkOpen scans the default sample site (3000 files, ~40 MB): the
// cost of Open and of each Publish. It lives in the external test package
// because internal/tools/site imports content.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	if _, err := site.Generate(dir, site.Config{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := content.Open(dir); err != nil {
			b.Fatal(err)
		}
	}
}
