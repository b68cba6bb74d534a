package front

import (
	"math"
	"sync"
	"syscall"
	"time"

	"shoal/internal/cluster/policy"
)

// HybridConfig holds the thresholds of the hybrid rule (seed 002 §3: migrate
// a connection only when the front is loaded; seed 001: hand off only large
// files). Zero fields take the defaults; a negative field turns its rule off.
type HybridConfig struct {
	// CPUPercent: hand off while the front's own CPU use is above this
	// (percent of one core, from getrusage(2) sampled every SampleEvery).
	// Default 30, the threshold seed 002 used.
	CPUPercent float64
	// ActiveConns: hand off while more client connections than this are
	// open at the front. Default 130, Weblins' overload threshold T
	// (seed 001).
	ActiveConns int64
	// MinSize: hand off requests for objects of at least this many bytes.
	// Default 100 KiB, Weblins' S (seed 001): below it relaying costs the
	// front little more than a handoff.
	MinSize int64
	// Size returns an object's size in bytes, or -1 when unknown (then the
	// size rule does not fire). On one host the front can read the nodes'
	// URL table (content.Store); nil, or -1 for a URL, falls back to the
	// size the cluster learned (policy.Request.Size: the nodes' size index
	// and relayed Content-Lengths).
	Size func(url string) int64
	// SampleEvery is the CPU sampling period. Default 1 s.
	SampleEvery time.Duration
}

func (h *HybridConfig) fill() {
	d := DefaultHybridConfig()
	if h.CPUPercent == 0 {
		h.CPUPercent = d.CPUPercent
	}
	if h.ActiveConns == 0 {
		h.ActiveConns = d.ActiveConns
	}
	if h.MinSize == 0 {
		h.MinSize = d.MinSize
	}
	if h.SampleEvery <= 0 {
		h.SampleEvery = d.SampleEvery
	}
}

// Hybrid returns a Config.Choose function implementing the hybrid rule:
// each request goes by handoff (normally PassFD) when the object is at least
// Config.Hybrid.MinSize bytes, or more than ActiveConns client connections
// are open, or the front's CPU is above CPUPercent — checked in that order,
// the first reason counted — and by relay otherwise (counted too, in
// Stats.Handoff). The CPU sampler starts with the first request and stops
// with the server. One returned function serves one Server.
func Hybrid(handoff DataPath) func(d policy.Decision, x *Exchange) DataPath {
	h := &hybrid{handoff: handoff, relay: Relay()}
	return h.choose
}

type hybrid struct {
	handoff, relay DataPath
	once           sync.Once
	cfg            HybridConfig
}

func (h *hybrid) choose(_ policy.Decision, x *Exchange) DataPath {
	s := x.cc.s
	h.once.Do(func() {
		h.cfg = s.cfg.Hybrid
		h.cfg.fill()
		if h.cfg.CPUPercent > 0 {
			go sampleCPU(s, h.cfg.SampleEvery)
		}
	})
	c := &s.ctr
	if h.cfg.MinSize > 0 {
		n := x.Policy.Size // from the cluster's size table (cluster/sizes.go)
		if h.cfg.Size != nil {
			if m := h.cfg.Size(x.Policy.URL); m >= 0 {
				n = m
			}
		}
		if n >= h.cfg.MinSize {
			c.hybrid[hybridSize].Add(1)
			return h.handoff
		}
	}
	if h.cfg.ActiveConns > 0 && s.ctr.connsActive.Load() > h.cfg.ActiveConns {
		c.hybrid[hybridConns].Add(1)
		return h.handoff
	}
	if h.cfg.CPUPercent > 0 && math.Float64frombits(c.cpuBits.Load()) > h.cfg.CPUPercent {
		c.hybrid[hybridCPU].Add(1)
		return h.handoff
	}
	c.hybrid[hybridRelay].Add(1)
	return h.relay
}

// sampleCPU stores the process's CPU use over each period in
// s.ctr.cpuBits until the server closes.
func sampleCPU(s *Server, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	last, lastAt := processCPU(), time.Now()
	for {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			cpu := processCPU()
			if wall := now.Sub(lastAt); wall > 0 {
				pct := float64(cpu-last) / float64(wall) * 100
				s.ctr.cpuBits.Store(math.Float64bits(pct))
			}
			last, lastAt = cpu, now
		}
	}
}

// processCPU is the process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
