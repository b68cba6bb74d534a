package cdnsim

import (
	"math/rand/v2"
	"time"
)

// GossipConfig is the baseline view protocol: heartbeat gossip in the
// style of van Renesse, Minsky and Hayden (Middleware 1998). Every Period
// each PoP bumps its heartbeat, refreshes its server performance and sends
// its whole list (id, heartbeat, server performance) to Fanout PoPs drawn at
// random; a PoP whose heartbeat has not grown for FailRounds periods is
// taken as failed. News spreads in O(log N) periods whatever N is, at the
// cost of O(N) bytes per message and O(N²) per period.
type GossipConfig struct {
	Period     time.Duration
	Fanout     int
	FailRounds int // 0: 2·⌈log₂N⌉ + 4, the usual choice for few false suspicions
}

// DefaultGossipConfig returns the baseline's defaults.
func DefaultGossipConfig() GossipConfig {
	return GossipConfig{Period: 2 * time.Second, Fanout: 1}
}

type gEntry struct {
	hb     uint64
	server float64
	heard  time.Time // when this PoP saw the heartbeat grow
	gen    time.Time // when the owner produced it (simulator only, to measure staleness)
	alive  bool
}

// gossipNode is one PoP's state in the baseline. Like mbpp.Node it takes
// the time with every call and returns the messages to send. The view is
// indexed by PoP (nil: not heard of yet): every message carries N entries
// and N PoPs merge one each period, so at 1,000 PoPs a map's lookups and
// iteration were most of a run's time.
type gossipNode struct {
	cfg    GossipConfig
	self   int
	fail   time.Duration
	view   []*gEntry
	due    time.Time
	rng    *rand.Rand
	server float64
	peers  []int // scratch
}

type gossipMsg struct {
	from    int
	entries []gWire
}

type gWire struct {
	id     int
	hb     uint64
	server float64
	gen    time.Time // not on the wire: the simulator's measure of staleness
}

// wireSize is the bytes of a message as it would be encoded: 8-byte ID,
// a varint heartbeat (≈3 bytes) and a 2-byte performance per entry, plus a
// 16-byte header.
func (m *gossipMsg) wireSize() int { return 16 + 13*len(m.entries) }

func newGossip(cfg GossipConfig, self, n int, contact int, now time.Time, seed uint64) *gossipNode {
	fr := cfg.FailRounds
	if fr <= 0 {
		l := 0
		for 1<<l < n {
			l++
		}
		fr = 2*l + 4
	}
	g := &gossipNode{cfg: cfg, self: self, fail: time.Duration(fr) * cfg.Period, view: make([]*gEntry, n),
		due: now.Add(cfg.Period), rng: rand.New(rand.NewPCG(seed, uint64(self))), server: 1}
	g.view[self] = &gEntry{hb: 1, server: 1, heard: now, gen: now, alive: true}
	if contact != self {
		g.view[contact] = &gEntry{heard: now, alive: true}
	}
	return g
}

func (g *gossipNode) next() time.Time { return g.due }

func (g *gossipNode) tick(now time.Time) []gossipMsg {
	if now.Before(g.due) {
		return nil
	}
	g.due = now.Add(g.cfg.Period)
	me := g.view[g.self]
	me.hb++
	me.server, me.heard, me.gen = g.server, now, now
	g.peers = g.peers[:0]
	var es []gWire
	for id, e := range g.view {
		if e == nil {
			continue
		}
		if id != g.self && e.alive && now.Sub(e.heard) > g.fail {
			e.alive = false
		}
		if e.alive {
			es = append(es, gWire{id, e.hb, e.server, e.gen})
			if id != g.self {
				g.peers = append(g.peers, id)
			}
		}
	}
	var out []gossipMsg
	for k := 0; k < g.cfg.Fanout && len(g.peers) > 0; k++ {
		i := g.rng.IntN(len(g.peers))
		to := g.peers[i]
		g.peers[i] = g.peers[len(g.peers)-1]
		g.peers = g.peers[:len(g.peers)-1]
		out = append(out, gossipMsg{from: to, entries: es}) // from holds the destination until sent
	}
	return out
}

func (g *gossipNode) handle(now time.Time, m gossipMsg) {
	for _, w := range m.entries {
		if w.id == g.self {
			continue
		}
		if w.id < 0 || w.id >= len(g.view) {
			continue
		}
		e := g.view[w.id]
		if e == nil {
			e = &gEntry{}
			g.view[w.id] = e
		}
		if w.hb > e.hb {
			e.hb, e.server, e.heard, e.gen, e.alive = w.hb, w.server, now, w.gen, true
		}
	}
}

func (g *gossipNode) alive(id int) bool {
	return id >= 0 && id < len(g.view) && g.view[id] != nil && g.view[id].alive
}
