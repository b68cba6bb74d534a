package front

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/base/procstat"
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
	// SampleEvery is the CPU sampling period. Default 100 ms: the share
	// of connections relayed in tag mode follows the load within a second.
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
//
// With passfd under a policy that shares its table (tag mode) the CPU rule
// works by connections instead: the front relays as many connections as
// keep its CPU near CPUPercent (relayShare) and lets the nodes move the
// rest among themselves; when it has room for more it tells the nodes
// (handoff.TableRoom, each node the whole room), which then hand
// connections back instead of moving them. Seed 000's moving nodes and
// seed 002's loaded front thus share the work.
func Hybrid(handoff DataPath) func(d policy.Decision, x *Exchange) DataPath {
	h := &hybrid{handoff: handoff, relay: Relay()}
	if p, ok := handoff.(*passfdPath); ok {
		h.tags, p.hybrid = p, h
	}
	return h.choose
}

type hybrid struct {
	handoff, relay DataPath
	once           sync.Once
	cfg            HybridConfig
	// tags is the handoff path when it is passfd (tag mode possible);
	// share says how many connections the front relays in tag mode.
	tags  *passfdPath
	share relayShare
}

func (h *hybrid) choose(_ policy.Decision, x *Exchange) DataPath {
	s := x.cc.s
	h.once.Do(func() {
		h.cfg = s.cfg.Hybrid
		h.cfg.fill()
		if h.cfg.CPUPercent > 0 {
			go sampleCPU(s, h.cfg.SampleEvery, h.sampled)
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
	if h.cfg.CPUPercent > 0 && h.tags != nil && h.tags.tagOn(s) {
		if s.share.Load() == nil {
			s.share.Store(&h.share)
		}
		if h.share.keep(&x.cc.relayed) {
			c.hybrid[hybridRelay].Add(1)
			return h.relay
		}
		c.hybrid[hybridCPU].Add(1)
		return h.handoff
	}
	if h.cfg.CPUPercent > 0 && math.Float64frombits(c.cpuBits.Load()) > h.cfg.CPUPercent {
		c.hybrid[hybridCPU].Add(1)
		return h.handoff
	}
	c.hybrid[hybridRelay].Add(1)
	return h.relay
}

// sampled takes a CPU sample (percent of one core): in tag mode it sets
// how many connections the front relays and tells the nodes the room left.
func (h *hybrid) sampled(s *Server, pct float64) {
	if h.tags == nil || !h.tags.tagOn(s) {
		return
	}
	h.tags.setRoom(h.share.update(pct, h.cfg.CPUPercent, h.tags.tagHeld()))
}

// sampleCPU stores the process's CPU use over each period in
// s.ctr.cpuBits, and gives it to f, until the server closes.
func sampleCPU(s *Server, every time.Duration, f func(*Server, float64)) {
	t := time.NewTicker(every)
	defer t.Stop()
	last, lastAt := procstat.CPU(), time.Now()
	for {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			cpu := procstat.CPU()
			if wall := now.Sub(lastAt); wall > 0 {
				pct := float64(cpu-last) / float64(wall) * 100
				s.ctr.cpuBits.Store(math.Float64bits(pct))
				f(s, pct)
			}
			last, lastAt = cpu, now
		}
	}
}

// relayShare is how many client connections the front relays itself in tag
// mode under the hybrid rule: want is set from each CPU sample (update), and
// relayed counts the connections the relay path holds now. Safe for
// concurrent use; the counts are approximate under races, which the next
// sample corrects.
type relayShare struct {
	want, relayed atomic.Int64
}

// keep reports whether the front relays the request of a connection whose
// relayed flag is *counted, and keeps the count: a connection is counted
// while the relay path holds it, and let go (handed off) while more are
// counted than wanted.
func (r *relayShare) keep(counted *bool) bool {
	if *counted {
		if r.relayed.Load() <= r.want.Load() {
			return true
		}
		r.relayed.Add(-1)
		*counted = false
		return false
	}
	if r.relayed.Load() < r.want.Load() {
		r.relayed.Add(1)
		*counted = true
		return true
	}
	return false
}

// drop forgets a counted connection that ended.
func (r *relayShare) drop(counted *bool) {
	if *counted {
		r.relayed.Add(-1)
		*counted = false
	}
}

// update sets want from the CPU share pct (percent of a core) the front used
// over the last period, aiming at target, and returns how many more
// connections than it relays the front wants (the room it offers the nodes,
// which hold held connections). The front's CPU grows with the connections
// it relays, so want scales with target/pct (fixed point: pct = target).
// Below the target want grows by at least one and at most doubles (plus
// one) from the larger of itself and the connections relayed, room offered
// and not yet taken up staying offered, up to twice every connection there
// is (the room is offered ahead: a connection a node takes over between
// two samples can come back at once); at or above it, want follows the
// connections relayed, down to half of them per period.
func (r *relayShare) update(pct, target float64, held int64) (room int64) {
	n, prev := r.relayed.Load(), r.want.Load()
	var want int64
	if pct < target {
		base := min(max(prev, n), math.MaxInt32)
		w := int64(min(math.Ceil(float64(n)*target/max(pct, 1)), math.MaxInt32))
		want = min(max(w, base+1), 2*base+1, 2*(n+max(held, 0))+1)
	} else {
		want = max(int64(float64(n)*target/pct), n/2)
	}
	r.want.Store(want)
	return max(want-n, 0)
}

// relayEnded takes a connection the hybrid rule counted as relayed out of
// its count: it ended at the front.
func (s *Server) relayEnded(cc *clientConn) {
	if r := s.share.Load(); r != nil {
		r.drop(&cc.relayed)
	}
}

// tagAsked counts a connection a node handed back in tag mode under the
// hybrid rule and tells the policy its URL, as the passfd path does for
// the connections it re-dispatches itself (passfdPath.moveRaw), so a node
// asks once per URL.
func (s *Server) tagAsked(url string) {
	s.ctr.tag.asked.Add(1)
	s.cl.TagAsked(url)
}
