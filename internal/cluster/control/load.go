package control

import "math"

// Which load each policy reads (SPEC §3):
//
//	lc, wlc, p2c, chbl, lard, lardr   Node.Active: requests in flight from
//	                                  this front plus connections handed off
//	                                  and not yet ended (held.go)
//	tbccrd                            its own connection table (connections
//	                                  per node), and Active for the load limit
//	weblins                           Active of the owner (overload T)
//	dfwrr                             Node.Load, from the node's status report
//	                                  (nodeLoad), every Period
//	rr, wrr, gwrr, urlhash            no load
//
// nodeLoad turns a node's status report into Node.Load, a utilisation in
// [0,1] by construction, so dfwrr's target (0.95) means the same on every
// machine: a node with its own process reports its process CPU, which is
// divided by the cores it may use (CPUs; a node that does not say counts
// as one core); nodes that share one process (`shoal up`, where every
// node's getrusage is the whole process's) report their own busy time
// instead (BusyPercent: time spent answering requests), divided likewise.
// The result is clamped to [0,1]; NaN or a negative figure reads as 0.
func nodeLoad(s *Status) float64 {
	pct := s.CPUPercent
	if s.SharedProcess {
		pct = s.BusyPercent
	}
	l := pct / 100 / float64(max(s.CPUs, 1))
	if math.IsNaN(l) || l < 0 {
		return 0
	}
	return min(l, 1)
}

// weighter is implemented by policies that schedule by weights of their
// own (dfwrr's feedback-adjusted weights), shown as NodeInfo.EffectiveWeight.
type weighter interface{ Weights() []int }
