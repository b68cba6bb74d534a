package site

import (
	"os"
	"testing"
)

// BenchmarkGenerate writes the default site from scratch (the cost `shoal up`
// pays on first start).
func BenchmarkGenerate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		d, err := os.MkdirTemp("", "site-bench")
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := Generate(d, Config{}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.RemoveAll(d)
		b.StartTimer()
	}
}

// BenchmarkPlan measures drawing the file list alone.
func BenchmarkPlan(b *testing.B) {
	b.ReportAllocs()
	cfg := Config{}.withDefaults()
	for b.Loop() {
		plan(cfg)
	}
}
