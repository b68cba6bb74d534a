package front

import (
	"math"
	"sync/atomic"
)

// counters are the front's counters, declared once: every data path adds
// to these atomics, Stats reads them, and internal/admin serves every Stats
// field on /metrics (its TestMetricsCoverFrontStats fails on a field that
// does not reach it). A handoff that did not happen is one counter labelled
// by reason (fallbacks), whichever path or loop gave up.
type counters struct {
	connsAccepted atomic.Uint64
	connsActive   atomic.Int64
	requests      atomic.Uint64
	retries       atomic.Uint64
	freshRedials  atomic.Uint64
	sent4xx       atomic.Uint64
	sent5xx       atomic.Uint64
	status        [6]atomic.Uint64
	bytesIn       atomic.Uint64
	bytesOut      atomic.Uint64
	queued        atomic.Uint64
	queueTimeouts atomic.Uint64
	queueFull     atomic.Uint64
	nodeDials     atomic.Uint64
	refusedLimit  atomic.Uint64
	refusedPerIP  atomic.Uint64
	idleShed      atomic.Uint64
	streaming     atomic.Int64
	// answers counts the front's own answers by reason (answers.go).
	answers [numAnswers]atomic.Uint64

	// The handoff paths (HandoffStats).
	passed, returned, returnRefused, ended, redispatched, lost, fastPassed atomic.Uint64
	hybrid                                                                 [numHybrid]atomic.Uint64
	cpuBits                                                                atomic.Uint64 // float64 bits of the last CPU sample
	fallbacks                                                              [numFallbacks]atomic.Uint64
	tag                                                                    tagCounters // passfd_tag.go
}

// fallbackReason says why a request chosen for a handoff was relayed (or,
// from the raw accept loop, given to the normal path) instead.
type fallbackReason uint8

const (
	fallbackNone        fallbackReason = iota
	fallbackNoSocket                   // the node has not reported a handoff socket
	fallbackSend                       // the send failed before the descriptor left
	fallbackSocketDir                  // the node's socket is outside HandoffDir
	fallbackSocketPeer                 // the node's socket is served by another user
	fallbackTLS                        // a TLS client connection (tls.go)
	fallbackFast                       // the raw accept loop gave the connection to the normal path
	fallbackFastBlocked                // … because the node's socket was full (included in fallbackFast)
	numFallbacks
)

// hybridReason is why the hybrid rule (hybrid.go) chose a path.
type hybridReason uint8

const (
	hybridCPU hybridReason = iota
	hybridConns
	hybridSize
	hybridRelay
	numHybrid
)

// fallback counts one fallback.
func (c *counters) fallback(r fallbackReason) { c.fallbacks[r].Add(1) }

func (c *counters) handoffStats() HandoffStats {
	f := func(r fallbackReason) uint64 { return c.fallbacks[r].Load() }
	return HandoffStats{
		Passed: c.passed.Load(), FallbackNoSocket: f(fallbackNoSocket), FallbackSend: f(fallbackSend),
		Returned: c.returned.Load(), ReturnRefused: c.returnRefused.Load(), Ended: c.ended.Load(),
		Redispatched: c.redispatched.Load(), Lost: c.lost.Load(),
		RefusedSocketDir: f(fallbackSocketDir), RefusedSocketPeer: f(fallbackSocketPeer), FallbackTLS: f(fallbackTLS),
		FastPassed: c.fastPassed.Load(), FastFallback: f(fallbackFast), FastBlocked: f(fallbackFastBlocked),
		HybridCPU: c.hybrid[hybridCPU].Load(), HybridConns: c.hybrid[hybridConns].Load(),
		HybridSize: c.hybrid[hybridSize].Load(), HybridRelay: c.hybrid[hybridRelay].Load(),
		FrontCPUPercent: math.Float64frombits(c.cpuBits.Load()),
		Tag:             c.tag.stats(),
	}
}
