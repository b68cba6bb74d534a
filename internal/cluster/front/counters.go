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
	pipelined     atomic.Uint64
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

	// Protocols (ProtocolStats): requests by protocol (protoH1's slot is
	// unused: the rest of requests), HTTP/2 and HTTP/3 connections, HTTP/2's
	// refusals, glitches and connection errors, PROXY headers.
	protoReqs                                   [numProtos]atomic.Uint64
	h2Conns, h3Conns                            atomic.Uint64
	h2Refused, h2Glitches, h2Errors             atomic.Uint64
	proxyAccepted, proxyRefused, proxyUntrusted atomic.Uint64

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
	fallbackStream                     // an HTTP/2 or HTTP/3 stream (mux.go)
	fallbackProxy                      // a connection whose address came in a PROXY header (proxyproto.go)
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
		FallbackStream: f(fallbackStream), FallbackProxy: f(fallbackProxy),
		HybridCPU: c.hybrid[hybridCPU].Load(), HybridConns: c.hybrid[hybridConns].Load(),
		HybridSize: c.hybrid[hybridSize].Load(), HybridRelay: c.hybrid[hybridRelay].Load(),
		FrontCPUPercent: math.Float64frombits(c.cpuBits.Load()),
		Tag:             c.tag.stats(),
	}
}

// ProtocolStats counts requests and connections by the protocol clients
// speak, and the PROXY protocol headers the front read.
type ProtocolStats struct {
	// Requests by protocol: HTTP/1.x, HTTP/2 streams, HTTP/3 streams.
	H1Requests, H2Requests, H3Requests uint64
	// H2Conns and H3Conns count connections that spoke HTTP/2 (ALPN h2 or
	// the h2c preface) and HTTP/3 (QUIC).
	H2Conns, H3Conns uint64
	// H2Refused counts streams refused past MaxConcurrentStreams;
	// H2Glitches streams the client reset, or made fail (malformed,
	// refused, flow-control errors); H2Errors connections ended by a
	// GOAWAY with an error code.
	H2Refused, H2Glitches, H2Errors uint64
	// ProxyAccepted counts PROXY protocol headers taken from trusted
	// sources; ProxyRefused connections closed for a missing or malformed
	// header from a trusted source; ProxyUntrusted connections closed for
	// sending one from an address not in Config.ProxyFrom.
	ProxyAccepted, ProxyRefused, ProxyUntrusted uint64
}

func (c *counters) protocolStats() ProtocolStats {
	h2, h3 := c.protoReqs[protoH2].Load(), c.protoReqs[protoH3].Load()
	return ProtocolStats{
		H1Requests: c.requests.Load() - h2 - h3, H2Requests: h2, H3Requests: h3,
		H2Conns: c.h2Conns.Load(), H3Conns: c.h3Conns.Load(),
		H2Refused: c.h2Refused.Load(), H2Glitches: c.h2Glitches.Load(), H2Errors: c.h2Errors.Load(),
		ProxyAccepted: c.proxyAccepted.Load(), ProxyRefused: c.proxyRefused.Load(), ProxyUntrusted: c.proxyUntrusted.Load(),
	}
}
