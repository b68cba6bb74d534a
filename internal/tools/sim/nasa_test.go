package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"

	"shoal/internal/base/trace"
)

const nasaPath = "../../../../shared/data/traces/nasa_aug95_19950801_fullday_derived.log.gz"

var nasa struct {
	once sync.Once
	acc  []Access
	err  error
}

// nasaAccesses loads the NASA trace once (sizes pass, then replay), or skips.
func nasaAccesses(tb testing.TB) []Access {
	tb.Helper()
	if _, err := os.Stat(nasaPath); err != nil {
		tb.Skipf("NASA trace not available at %s: %v", nasaPath, err)
	}
	nasa.once.Do(func() {
		sizes, err := trace.Sizes(nasaPath)
		if err != nil {
			nasa.err = err
			return
		}
		r, err := trace.Open(nasaPath)
		if err != nil {
			nasa.err = err
			return
		}
		defer r.Close()
		nasa.acc, nasa.err = Load(NewTraceSource(r, ObjectSizes(sizes)))
	})
	if nasa.err != nil {
		tb.Fatal(nasa.err)
	}
	return nasa.acc
}

func nasaSweep(tb testing.TB, policies []string, nodes []int, cacheBytes int64) []Result {
	acc := nasaAccesses(tb)
	sw := Sweep{Base: Config{CacheBytes: cacheBytes, Seed: 1}, Policies: policies, Nodes: nodes,
		Open: func() (Source, error) { return NewSliceSource(acc), nil }}
	res, err := sw.Run(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// TestNASAValidation checks the seeds' headline results on the NASA trace
// with 2 MiB per node (the working set is ~106 MiB): wrr's miss ratio stays
// flat as nodes are added because every node caches the same hot files,
// while lard's and tbccrd's fall because the caches partition the working
// set; at 8 nodes that gives lard and tbccrd at least twice wrr's throughput
// (LARD: "2–4× WRR when the working set exceeds one node's memory").
func TestNASAValidation(t *testing.T) {
	if testing.Short() {
		t.Skip("NASA sweep skipped under -short")
	}
	for _, mb := range []int64{2, 4} {
		res := nasaSweep(t, []string{"wrr", "lard", "tbccrd"}, []int{1, 8}, mb<<20)
		get := func(i int) Result { return res[i] }
		wrr1, wrr8 := get(0), get(1)
		if d := wrr8.MissRatio - wrr1.MissRatio; d < -0.05 || d > 0.05 {
			t.Errorf("%d MiB: wrr miss ratio %.3f → %.3f from 1 to 8 nodes, want flat (±0.05)", mb, wrr1.MissRatio, wrr8.MissRatio)
		}
		for k, name := range []string{"lard", "tbccrd"} {
			one, eight := get(2+2*k), get(3+2*k)
			if eight.MissRatio > one.MissRatio-0.1 {
				t.Errorf("%d MiB: %s miss ratio %.3f → %.3f, want a fall of at least 0.1", mb, name, one.MissRatio, eight.MissRatio)
			}
			if eight.ThroughputRPS < 2*wrr8.ThroughputRPS {
				t.Errorf("%d MiB: 8 nodes %s %.0f req/s vs wrr %.0f, want ≥ 2×", mb, name, eight.ThroughputRPS, wrr8.ThroughputRPS)
			}
			t.Logf("%d MiB, 8 nodes: %s/wrr throughput %.2f×, miss %.3f vs %.3f", mb, name, eight.ThroughputRPS/wrr8.ThroughputRPS, eight.MissRatio, wrr8.MissRatio)
		}
	}
}

// TestNASABigFiles: with TB-CCRD's fixed threshold (Costs.NoCacheAbove =
// 500 KiB) every request for a larger object is counted as going to disk,
// whatever the policy; with the default, the live nodes' admission (an
// eighth of the 64 MiB budget, 8 MiB), none of the trace's is.
func TestNASABigFiles(t *testing.T) {
	acc := nasaAccesses(t)
	var big int64
	for _, a := range acc {
		if a.Size > 500<<10 {
			big++
		}
	}
	if big == 0 {
		t.Fatal("no large objects in the NASA trace; test is vacuous")
	}
	costs := DefaultCosts()
	costs.NoCacheAbove = 500 << 10
	acc500 := nasaAccesses(t)
	sw := Sweep{Base: Config{CacheBytes: 64 << 20, Seed: 1, Costs: &costs}, Policies: []string{"wrr", "lard", "tbccrd", "weblins"},
		Nodes: []int{4}, Open: func() (Source, error) { return NewSliceSource(acc500), nil }}
	res, err := sw.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.BigToDisk != big || r.DiskReads < big {
			t.Errorf("%s, 500 KiB threshold: %d big requests to disk, %d disk reads; want %d", r.Policy, r.BigToDisk, r.DiskReads, big)
		}
	}
	for _, r := range nasaSweep(t, []string{"wrr", "lard"}, []int{4}, 64<<20) {
		if r.BigToDisk != 0 {
			t.Errorf("%s, default admission: %d big requests to disk, want 0", r.Policy, r.BigToDisk)
		}
	}
}

// TestDeterministic runs the same sweep twice (in parallel goroutines) and
// compares the JSON bytes.
func TestDeterministic(t *testing.T) {
	acc := nasaAccesses(t)
	if testing.Short() {
		acc = acc[:5000]
	}
	once := func() []byte {
		sw := Sweep{Base: Config{CacheBytes: 2 << 20, Seed: 7, Cache: "cgdsf"},
			Policies: []string{"p2c", "lardr", "tbccrd", "weblins", "dfwrr"}, Nodes: []int{1, 3, 8}, Parallel: 4,
			Open: func() (Source, error) { return NewSliceSource(acc), nil }}
		res, err := sw.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(Rows(res))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := once(), once()
	if !bytes.Equal(a, b) {
		t.Errorf("two runs differ:\n%s\n%s", a, b)
	}
}
