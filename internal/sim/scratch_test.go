package sim

import (
	"fmt"
	"testing"
	"time"

	"shoal/internal/policy"
	"shoal/internal/trace"
)

func TestScratchWeblins(t *testing.T) {
	acc := scratchAcc(t)
	for _, c := range []string{"lru", "cgdsf"} {
		for _, v := range []struct {
			name string
			pc   policy.Config
		}{
			{"default", policy.Config{}},
			{"popN100", policy.Config{PopularN: 100}},
			{"nocache100k", policy.Config{NoCacheAbove: 100 << 10}},
			{"popN100+nocache100k", policy.Config{PopularN: 100, NoCacheAbove: 100 << 10}},
			{"popN100+nocache100k+period20s", policy.Config{PopularN: 100, NoCacheAbove: 100 << 10, Period: 20 * time.Second}},
			{"popN100+nocache100k+period1s", policy.Config{PopularN: 100, NoCacheAbove: 100 << 10, Period: 1 * time.Second}},
		} {
			r, err := Run(Config{Policy: "weblins", Nodes: 4, CacheBytes: 2 << 20, Cache: c, PolicyConfig: v.pc}, NewSliceSource(acc))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%s %s hit=%.3f bhit=%.3f ib=%.0f el=%v\n", c, v.name, r.HitRatio, r.ByteHitRatio, r.InternalBytesPerRequest, r.Elapsed)
		}
	}
}

func TestScratchWindow(t *testing.T) {
	acc := scratchAccPath(t, "/tmp/coopsim-filtered.log")
	for _, c := range []string{"lru", "gdsf", "cgdsf"} {
		for _, pn := range []int{0, 2, 16} {
			for _, ts := range []float64{0, 1} {
				if ts > 0 && pn > 0 {
					continue
				}
				r, err := Run(Config{Policy: "weblins", Nodes: 4, CacheBytes: 2 << 20, Cache: c, PerNode: pn, TimeScale: ts, PolicyConfig: policy.Config{PopularN: 100}}, NewSliceSource(acc))
				if err != nil {
					t.Fatal(err)
				}
				fmt.Printf("%s perNode=%d ts=%v req=%d hit=%.3f bhit=%.3f fetchB=%.0f el=%v win=%d\n", c, pn, ts, r.Requests, r.HitRatio, r.ByteHitRatio, r.FetchBytesPerRequest, r.Elapsed, r.Window)
			}
		}
	}
}

func scratchAccPath(t *testing.T, p string) []Access {
	sizes, err := trace.Sizes(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := trace.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	acc, err := Load(NewTraceSource(r, sizes))
	if err != nil {
		t.Fatal(err)
	}
	return acc
}

func scratchAcc(t *testing.T) []Access {
	p := "/work/shared/data/traces/nasa_aug95_19950801_fullday_derived.log.gz"
	sizes, err := trace.Sizes(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := trace.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	acc, err := Load(NewTraceSource(r, sizes))
	if err != nil {
		t.Fatal(err)
	}
	return acc
}
