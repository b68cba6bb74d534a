package sim

import (
	"errors"
	"fmt"
	"time"
)

// Measured is what a live cluster's replay of a trace shows about its
// hardware: how long a node works on a request, and how long a request
// lives in the system. Both are means over the replay; a closed-loop
// replay of Requests with Window requests in the system over Wall gives
// InSystem = Window·Wall/Requests (Little's law).
type Measured struct {
	// NodeBusy is a node's time on one request: its busy time (the
	// nodes' summed time answering requests) over the requests served.
	NodeBusy time.Duration
	// InSystem is a request's time from the client's send to its having
	// the whole response.
	InSystem time.Duration
}

// Calibrate returns the costs at which cfg's run over open's source takes
// the measured times: cfg's costs (DefaultCosts when nil) with every time
// cost scaled so a simulated node's CPU and disk time per request is
// m.NodeBusy (Scaled), and Delivery set to what a request's simulated time
// in the system then lacks of m.InSystem. The model keeps its shape (a
// miss costs what it costs relative to a hit), and the live cluster's
// speed comes from two measurements rather than fitted constants, so the
// policies' loads (Node.Active, which counts delivery) and periods
// (Config.PolicyConfig.Period, in virtual time) follow the live ones.
// Throughput mode only; two runs of the simulator.
func Calibrate(cfg Config, open func() Source, m Measured) (Costs, error) {
	if cfg.TimeScale != 0 {
		return Costs{}, errors.New("sim: calibrate: throughput mode only")
	}
	if m.NodeBusy <= 0 || m.InSystem <= 0 {
		return Costs{}, fmt.Errorf("sim: calibrate: node busy %v and time in system %v must be positive", m.NodeBusy, m.InSystem)
	}
	c := DefaultCosts()
	if cfg.Costs != nil {
		c = *cfg.Costs
	}
	c.Delivery = 0
	cfg.Costs = &c
	res, err := Run(cfg, open())
	if err != nil {
		return Costs{}, err
	}
	busy := res.nodeBusy()
	if busy <= 0 || res.Requests == 0 {
		return Costs{}, errors.New("sim: calibrate: the run served nothing")
	}
	c = c.Scaled(float64(m.NodeBusy) / float64(busy))
	cfg.Costs = &c
	if res, err = Run(cfg, open()); err != nil {
		return Costs{}, err
	}
	c.Delivery = max(m.InSystem-res.inSystem(), 0)
	return c, nil
}

// nodeBusy is the nodes' CPU and disk time per request served.
func (r Result) nodeBusy() time.Duration {
	var sum float64
	for j := range r.NodeCPU {
		sum += (r.NodeCPU[j] + r.NodeDisk[j]) * float64(r.Elapsed)
	}
	return time.Duration(sum / float64(max(r.Requests, 1)))
}

// inSystem is a request's mean time in the system (MeanLatencyMS).
func (r Result) inSystem() time.Duration {
	return time.Duration(r.MeanLatencyMS * float64(time.Millisecond))
}
