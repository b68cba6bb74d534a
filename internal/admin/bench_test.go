package admin

import (
	"testing"
	"time"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
)

// BenchmarkObserve is the per-request cost the metrics add to the front.
func BenchmarkObserve(b *testing.B) {
	cl, err := control.New(&tablePolicy{}, []control.NodeSpec{{URL: "http://127.0.0.1:9001"}, {URL: "http://127.0.0.1:9002"}}, control.Options{})
	if err != nil {
		b.Fatal(err)
	}
	m := NewMetrics(cl, "table")
	o := front.Observation{Node: 1, Path: "relay", Status: 200, Elapsed: time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		m.Observe(o)
	}
}
