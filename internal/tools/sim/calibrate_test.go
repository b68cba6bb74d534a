package sim

import (
	"testing"
	"time"
)

// TestCalibrate: with one request in the system nothing queues, so the
// calibrated costs give exactly the measured node time per request and
// time in the system, and the model keeps its shape (a miss still costs
// its disk read relative to a hit).
func TestCalibrate(t *testing.T) {
	acc := []Access{{URL: "/a", Size: 9000}, {URL: "/b", Size: 100}, {URL: "/a", Size: 9000}, {URL: "/c", Size: 60 << 10}}
	open := func() Source { return NewSliceSource(acc) }
	cfg := Config{Policy: "wrr", Nodes: 1, PerNode: 1}
	m := Measured{NodeBusy: 100 * time.Microsecond, InSystem: 2 * time.Millisecond}
	c, err := Calibrate(cfg, open, m)
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultCosts()
	if f := float64(c.DiskLatency) / float64(def.DiskLatency); f <= 0 || f >= 1 ||
		abs(float64(c.ConnSetup)/float64(def.ConnSetup)-f) > 1e-3 {
		t.Errorf("not one scale: disk %v (×%.5f), setup %v", c.DiskLatency, f, c.ConnSetup)
	}
	cfg.Costs = &c
	res, err := Run(cfg, open())
	if err != nil {
		t.Fatal(err)
	}
	if d := res.nodeBusy() - m.NodeBusy; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("node time per request %v, want %v", res.nodeBusy(), m.NodeBusy)
	}
	if d := res.inSystem() - m.InSystem; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("time in system %v, want %v (delivery %v)", res.inSystem(), m.InSystem, c.Delivery)
	}
	if _, err := Calibrate(cfg, open, Measured{}); err == nil {
		t.Error("calibrated to nothing measured")
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
