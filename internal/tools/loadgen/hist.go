package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// Histogram layout (log-linear, in the style of HdrHistogram):
//
//   - values 0 … 255 ns each have their own bucket (exact);
//   - every power-of-two range [2^e, 2^(e+1)) with e ≥ 8 is split into 128
//     equal sub-buckets of width 2^(e-7).
//
// A bucket's width is therefore at most 1/128 of its lower bound, and a
// quantile is reported as the bucket midpoint, so the relative error of any
// reported value is ≤ 1/256 ≈ 0.4 % (the SPEC §7 budget is 1 %). The layout
// covers the whole non-negative int64 range with 7296 fixed counters
// (57 KiB), so Record never allocates and two histograms merge by adding
// counters — each load-generator worker owns one and they are merged at the
// end, keeping the hot path free of shared cache lines.
const (
	subBits     = 7
	subCount    = 1 << subBits // sub-buckets per power of two
	linearLimit = 2 * subCount // values below this are exact
	numBuckets  = linearLimit + (63-(subBits+1))*subCount
)

// Histogram records durations (nanoseconds) with bounded relative error.
// The zero value is ready to use. It is not safe for concurrent use: give
// each goroutine its own and Merge them.
type Histogram struct {
	counts [numBuckets]uint64
	n      uint64
	min    int64
	max    int64
	sum    float64 // ns; float so that long runs cannot overflow
}

// bucketOf maps a non-negative value to its bucket index.
func bucketOf(v int64) int {
	if v < linearLimit {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - 1 // ≥ subBits+1
	sub := int(v>>(e-subBits)) & (subCount - 1)
	return linearLimit + (e-subBits-1)*subCount + sub
}

// bucketRange returns the inclusive lower bound and the width of bucket i.
func bucketRange(i int) (lo, width int64) {
	if i < linearLimit {
		return int64(i), 1
	}
	j := i - linearLimit
	e := j/subCount + subBits + 1
	sub := int64(j % subCount)
	width = int64(1) << (e - subBits)
	return int64(1)<<e + sub*width, width
}

// Record adds one duration. Negative durations (clock steps) count as 0.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// Merge adds every sample of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Reset empties the histogram.
func (h *Histogram) Reset() { *h = Histogram{} }

// Count is the number of recorded samples.
func (h *Histogram) Count() uint64 { return h.n }

// Min is the smallest recorded sample, exact (0 when empty).
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Max is the largest recorded sample, exact (0 when empty).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is the exact arithmetic mean of the samples (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(math.Round(h.sum / float64(h.n)))
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) by the nearest-rank rule: the
// value of the ⌈q·n⌉-th smallest sample (the first for q = 0). The value is
// the midpoint of that sample's bucket clamped to [Min, Max], hence within
// 0.4 % of the true sample; it is exact below 256 ns and when the rank is
// the last one (the maximum is tracked exactly).
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	if rank >= h.n { // the largest sample is known exactly
		return time.Duration(h.max)
	}
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		if seen >= rank {
			lo, w := bucketRange(i)
			v := lo + (w-1)/2
			if v < h.min {
				v = h.min
			}
			if v > h.max {
				v = h.max
			}
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}
