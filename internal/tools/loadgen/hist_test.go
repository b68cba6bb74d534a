package loadgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketLayout(t *testing.T) {
	// Hand-computed: values < 256 are exact; [256,512) has width 2; 512
	// starts the next power of two with width 4; the top bucket is the
	// last counter.
	cases := []struct {
		v     int64
		idx   int
		lo, w int64
	}{
		{0, 0, 0, 1},
		{255, 255, 255, 1},
		{256, 256, 256, 2},
		{257, 256, 256, 2},
		{258, 257, 258, 2},
		{511, 383, 510, 2},
		{512, 384, 512, 4},
		{1000000, 256 + 11*128 + 116, 999424, 4096},
		{math.MaxInt64, numBuckets - 1, math.MaxInt64 - (1 << 55) + 1, 1 << 55},
	}
	for _, c := range cases {
		idx := bucketOf(c.v)
		lo, w := bucketRange(idx)
		if idx != c.idx || lo != c.lo || w != c.w {
			t.Errorf("value %d: bucket %d [%d,+%d), want %d [%d,+%d)", c.v, idx, lo, w, c.idx, c.lo, c.w)
		}
	}
}

func TestQuantilesKnown(t *testing.T) {
	var h Histogram
	for v := 1; v <= 100; v++ { // exact range: nearest-rank quantiles of 1..100
		h.Record(time.Duration(v))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 50}, {0.9, 90}, {0.99, 99}, {0.999, 100}, {1, 100}} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("q=%v: got %v want %v", c.q, got, c.want)
		}
	}
	if h.Count() != 100 || h.Min() != 1 || h.Max() != 100 || h.Mean() != 51 { // mean 50.5 rounds to 51
		t.Errorf("count/min/max/mean = %d/%v/%v/%v", h.Count(), h.Min(), h.Max(), h.Mean())
	}

	// 1 ms lands in bucket [999424, 1003520): its midpoint 1001471 ns is
	// reported (0.15 % high); the max is exact.
	h.Reset()
	h.Record(time.Millisecond)
	h.Record(10 * time.Millisecond)
	if got := h.Quantile(0.5); got != 1001471 {
		t.Errorf("p50 = %d ns, want 1001471", got)
	}
	if got := h.Quantile(0.99); got != 10*time.Millisecond {
		t.Errorf("p99 = %v, want clamped to max 10ms", got)
	}
	// A single sample is reported exactly (clamped to [min,max]).
	h.Reset()
	h.Record(1234567)
	if got := h.Quantile(0.5); got != 1234567 {
		t.Errorf("single sample p50 = %d", got)
	}
	h.Reset()
	if h.Quantile(0.5) != 0 || h.Mean() != 0 {
		t.Error("empty histogram must report 0")
	}
	h.Record(-5) // clock step: counted as 0
	if h.Max() != 0 || h.Count() != 1 {
		t.Errorf("negative sample: max %v count %d", h.Max(), h.Count())
	}
}

func TestQuantileRelativeError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	vals := make([]int64, 20000)
	for i := range vals {
		vals[i] = int64(math.Exp(rng.Float64() * 30)) // 1 ns … 10 s, log-uniform
		h.Record(time.Duration(vals[i]))
	}
	slices.Sort(vals)
	for _, q := range []float64{0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999} {
		rank := int(math.Ceil(q * float64(len(vals))))
		want := float64(vals[rank-1])
		got := float64(h.Quantile(q))
		if rel := math.Abs(got-want) / want; rel > 1.0/256 {
			t.Errorf("q=%v: got %v want %v (relative error %.4f > 1/256)", q, got, want, rel)
		}
	}
}

func TestMerge(t *testing.T) {
	var a, b, all Histogram
	for i := 1; i <= 1000; i++ {
		d := time.Duration(i * 997)
		all.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	var m Histogram
	m.Merge(&a)
	m.Merge(&b)
	m.Merge(&Histogram{})
	if m.counts != all.counts || m.Count() != all.Count() || m.Min() != all.Min() || m.Max() != all.Max() || m.Mean() != all.Mean() {
		t.Fatal("merged histogram differs from the histogram of all samples")
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	b.ReportAllocs()
	var h Histogram
	for i := 0; b.Loop(); i++ {
		h.Record(time.Duration(i&0xfffff) * 1000)
	}
}
