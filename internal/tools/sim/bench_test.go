package sim

import (
	"os"
	"testing"

	"shoal/internal/base/procstat"
	"shoal/internal/base/trace"
)

// benchAccesses is the NASA trace when present, else a synthetic Zipf
// workload of the same length, held in memory so the benchmark measures the
// simulator, not log parsing.
func benchAccesses(b *testing.B) []Access {
	b.Helper()
	if _, err := os.Stat(nasaPath); err == nil {
		return nasaAccesses(b)
	}
	g, err := trace.Synth{Files: 2000, Requests: 34000, Seed: 1}.New()
	if err != nil {
		b.Fatal(err)
	}
	acc, err := Load(NewTraceSource(g, g.Sizes()))
	if err != nil {
		b.Fatal(err)
	}
	return acc
}

func benchPolicy(b *testing.B, pol string, nodes int) {
	acc := benchAccesses(b)
	b.ReportAllocs()
	cpu0 := procstat.CPU()
	var n int64
	for b.Loop() {
		res, err := Run(Config{Policy: pol, Nodes: nodes, CacheBytes: 2 << 20}, NewSliceSource(acc))
		if err != nil {
			b.Fatal(err)
		}
		n += res.Requests
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "requests/s")
	// On a shared machine wall time undercounts a core; CPU time of the
	// process (GC included) gives the per-core rate.
	if cpu := procstat.CPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(n)/cpu.Seconds(), "requests/cpu-s")
	}
}

// BenchmarkSimWRR8 measures the simulator's speed: trace requests simulated per
// second for wrr on 8 nodes (one core).
func BenchmarkSimWRR8(b *testing.B)    { benchPolicy(b, "wrr", 8) }
func BenchmarkSimLARD8(b *testing.B)   { benchPolicy(b, "lard", 8) }
func BenchmarkSimTBCCRD8(b *testing.B) { benchPolicy(b, "tbccrd", 8) }
