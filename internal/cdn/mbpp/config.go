// Package mbpp is the measurement-based ping-pong protocol of seed 003 (DCDN,
// §2 "全局负载均衡策略"): the points of presence (PoPs) of the CDN stand on a
// logical ring; a ping token carries the performance list around it and a pong
// token travels the other way to detect a lost ping (Misra's ping-pong, Wu Jie,
// Distributed System Design p. 74, as SPEC §5 restates it). Every PoP ends up
// with the same view of each PoP's link and server performance, from which a
// score serv = L·perf_link + K·perf_server is computed.
//
// The package is a pure state machine: a Node takes a message or a clock tick
// (the time is always passed in) and returns the messages to send. It does no
// I/O, starts no goroutine and reads no clock, so the daemon (internal/cdn/pop),
// the unit tests (virtual clock, in-memory network) and the simulator run the
// same code.
package mbpp

import (
	"fmt"
	"time"
)

// Config holds every constant of the protocol. DefaultConfig gives the values;
// the daemon's TOML (internal/config, [pop]) overrides them.
type Config struct {
	// Self is this PoP's identifier; it also fixes its place on the ring
	// (members are ordered by ID, so internal/cdn/chord can use the same IDs).
	Self ID
	// Name and Addr are this PoP's name and peer address, carried in its
	// entry so that every PoP can reach every other.
	Name, Addr string
	// Gateway is this PoP's client-facing addresses (comma-separated IPs of
	// its gateway), published in its entry so that any PoP's DNS can answer
	// them: the peer address Addr is for PoPs, not clients (seed 003 §3.3:
	// the gateway is the PoP's one address for its users). A PoP sets it
	// in its entry at its first refresh, so it needs no place in the join.
	Gateway string

	// Hold is how long a PoP keeps a token before passing it on. It sets
	// the pace of the ring (one round ≈ N·(Hold + one-way delay)) and so
	// the traffic: the seed's ping runs continuously, a hold bounds it.
	Hold time.Duration
	// AckTimeout is how long a sender waits for a neighbour's ack of a
	// token before sending it again.
	AckTimeout time.Duration
	// Retries is how many times a token is sent again before the
	// neighbour is declared failed and dropped from the ring.
	Retries int
	// WatchdogRounds: a PoP that has seen no token for this many expected
	// rounds regenerates both (both tokens were lost, which Misra's
	// algorithm alone cannot detect).
	WatchdogRounds int
	// JoinTimeout is how long a newcomer waits for an answer from one
	// contact before trying the next.
	JoinTimeout time.Duration
	// HealEvery is how often a ring's member with the lowest ID probes
	// one PoP its view holds dead (each in turn), so that two rings a
	// partition made find each other when it heals and the smaller
	// dissolves into the larger (heal.go). 0 turns probing off: a split
	// ring then stays split.
	HealEvery time.Duration

	// LearningFactor is A of seed 003 §2 (2): perf_link ← (1−A)·perf_link
	// + A·sample smooths sudden changes of the measured link delay.
	LearningFactor float64
	// WeightLink and WeightServer are L and K of seed 003 §2 (5):
	// serv = L·perf_link + K·perf_server, empirically 1:3, because server
	// performance matters more than link performance (§2 (3)).
	WeightLink, WeightServer float64
	// LocalBonus is added to the PoP's own score: seed 003 §2 (4) prefers
	// the local PoP to keep traffic off the backbone.
	LocalBonus float64
	// RTTRef normalises a link delay to (0,1]: perf_link = RTTRef/(RTTRef+rtt),
	// so a link of RTT RTTRef scores 0.5.
	RTTRef time.Duration
	// RTTDeadband is the relative change of a smoothed link RTT below
	// which the entry is not sent again (delta encoding).
	RTTDeadband float64
	// PublishLinks is how many of its measured links a PoP publishes in its
	// entry F(x): the nearest ones. Seed 003 §3.2 has the gateway measure
	// "the link performance (RTT) from the PoP to its neighbouring PoPs",
	// and use what it measures both for its own routing and, as F(x), in
	// MBPP. Routing here always uses every link the PoP itself measured
	// (RTTTo); the bound keeps the performance list, which every PoP holds
	// whole, at N·PublishLinks links instead of N² (at 1,000
	// PoPs, 10⁹ links across a simulator's views). 0 publishes all.
	PublishLinks int
	// ServerDeadband is the absolute change of server performance (0..1)
	// below which the entry is not sent again.
	ServerDeadband float64
	// EstimateRTT ranks a peer this PoP has not measured by an estimate
	// read off the view — the shortest path through one PoP it has
	// measured and whose link to the peer is published (EstimateRTT on
	// Node) — instead of giving it no link performance. Off is the seed's
	// algorithm (a PoP ranks by what it measured, §3.2); at 1,000 PoPs a
	// PoP has measured a tenth of the others, and the estimate is the
	// improvement measured in docs/cdn.md.
	EstimateRTT bool

	// Accept decides, at every PoP the join proposal passes, whether the
	// newcomer is accepted (seed 003 §3.1: a PoP joins with the
	// authentication seed after one ping cycle accepted by all PoPs). Nil
	// accepts everyone (the transport has already authenticated the frame).
	Accept func(Proposal) error
}

// DefaultConfig returns the defaults for the PoP self.
func DefaultConfig(self ID, name, addr string) Config {
	return Config{
		Self: self, Name: name, Addr: addr,
		Hold:           100 * time.Millisecond,
		AckTimeout:     500 * time.Millisecond,
		Retries:        2,
		WatchdogRounds: 3,
		JoinTimeout:    5 * time.Second,
		HealEvery:      2 * time.Second,
		LearningFactor: 0.125, // RFC 6298's α for SRTT
		WeightLink:     1,
		WeightServer:   3,
		LocalBonus:     0.1,
		RTTRef:         50 * time.Millisecond,
		RTTDeadband:    0.05,
		ServerDeadband: 0.02,
		PublishLinks:   16,
	}
}

// Validate reports the first value that makes no sense.
func (c Config) Validate() error {
	switch {
	case c.Self == 0:
		return fmt.Errorf("mbpp: id 0 is reserved")
	case c.Hold <= 0, c.AckTimeout <= 0, c.JoinTimeout <= 0, c.RTTRef <= 0:
		return fmt.Errorf("mbpp: hold, ack timeout, join timeout and rtt ref must be > 0")
	case c.HealEvery < 0:
		return fmt.Errorf("mbpp: heal period %v must be ≥ 0", c.HealEvery)
	case c.PublishLinks < 0:
		return fmt.Errorf("mbpp: publish links %d must be ≥ 0", c.PublishLinks)
	case c.Retries < 0, c.WatchdogRounds < 1:
		return fmt.Errorf("mbpp: retries must be ≥ 0 and watchdog rounds ≥ 1")
	case c.LearningFactor <= 0 || c.LearningFactor > 1:
		return fmt.Errorf("mbpp: learning factor %v is outside (0,1]", c.LearningFactor)
	case c.WeightLink < 0 || c.WeightServer < 0 || c.WeightLink+c.WeightServer == 0:
		return fmt.Errorf("mbpp: weights L=%v K=%v must be ≥ 0, not both 0", c.WeightLink, c.WeightServer)
	}
	return nil
}

// FailureBound is the longest time between a PoP failing and every other PoP
// marking it dead, for n PoPs and a largest one-way delay d: within one round
// a token is sent to it (or, if it died holding one, the other token comes
// round: Misra's check, at most two rounds), the sender gives up after
// (Retries+1)·AckTimeout, and the death travels one more round with the
// ping (three rounds). If it died holding both tokens, nothing circulates
// until a watchdog fires (WatchdogRounds more, each of them a round as the
// watchdog reckons it, with AckTimeout for the delay it cannot know, plus
// Hold per rank: watchdogDue). The bound returned is that worst case, in
// rounds and in time, with the ack waits of two senders.
func (c Config) FailureBound(n int, d time.Duration) (rounds int, total time.Duration) {
	watchdog := time.Duration(c.WatchdogRounds)*c.Round(n, c.AckTimeout) + time.Duration(max(n-1, 0))*c.Hold
	return 3 + c.WatchdogRounds, 3*c.Round(n, d) + watchdog + 2*time.Duration(c.Retries+1)*c.AckTimeout
}

// Round is the expected time of one ping cycle over n PoPs with one-way
// delay d.
func (c Config) Round(n int, d time.Duration) time.Duration {
	return time.Duration(max(n, 1)) * (c.Hold + d)
}
