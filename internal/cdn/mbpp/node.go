package mbpp

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Stats counts what a Node did; tests and /metrics read them.
type Stats struct {
	PingsIn, PongsIn    uint64 // tokens accepted
	Duplicates          uint64 // tokens dropped as old or duplicated copies
	PingRegen           uint64 // pings regenerated (a pong found the ping lost)
	PongRegen           uint64 // pongs regenerated (a ping found the pong lost)
	Meets               uint64 // the tokens met (at a PoP or crossing on a link)
	WatchdogRegen       uint64 // both tokens regenerated after a silence
	Declared            uint64 // neighbours this PoP declared failed
	Retransmits         uint64 // tokens sent again for want of an ack
	Cycles              uint64 // pings this PoP held (one per round)
	JoinsCommitted      uint64 // proposals this PoP committed as origin
	JoinsRefused        uint64
	ProposalsRejected   uint64 // proposals this PoP rejected (Config.Accept)
	Rejoins             uint64 // times this PoP found itself declared dead and rejoined
	Probes              uint64 // probes sent to PoPs held dead (heal.go)
	Merges              uint64 // times this PoP left its ring to join a larger one it found (heal.go)
	MsgsOut, EntriesOut uint64
}

type pending struct {
	out      bool      // injected in a ping that has not come back
	outAt    time.Time // when it was injected
	proposal Proposal
}

type outstanding struct {
	active   bool
	msg      Msg
	deadline time.Time
	tries    int
	vers     []idVer // entry versions the unacked ping carries
}

// idVer is an entry's version as a ping carried it; a slice of them, not a
// map, because a ping of N entries was allocating a map of N every hop.
type idVer struct {
	id ID
	v  sentVer
}

type sentVer struct {
	inc uint32
	ver uint64
}

// Node is one PoP's MBPP state machine. It is not safe for concurrent use:
// the daemon serialises calls.
type Node struct {
	cfg  Config
	view map[ID]*Entry

	ring      []ID // alive members, sorted; nil when stale
	joined    bool
	refused   string
	contacts  []string
	contact   int
	joinDue   time.Time
	proof     []byte
	joinedAt  time.Time
	lastToken time.Time

	// Misra's ping-pong (SPEC §5).
	m                          int64 // m_i: the number of the last token seen
	maxPing, minPong           int64 // highest ping / lowest pong accepted, to drop old copies
	havePing, havePong         bool
	ping, pong                 int64
	pingDue, pongDue           time.Time
	lastPingSent, lastPongSent int64
	lastPingTo, lastPongTo     ID
	out                        [2]outstanding // unacked ping, pong

	healDue  time.Time // the next probe of a dead PoP (heal.go)
	healNext int       // which dead PoP it goes to, in turn

	sentTo ID
	// sent holds, per entry, the version the successor has acked: a ping
	// carries what changed since then. Counting a version as delivered
	// only on the ack matters: a ping dropped by a PoP not yet welcomed,
	// or superseded by a newer ping, would otherwise lose the entry's
	// name and address for good (later deltas carry no meta).
	sent      map[ID]sentVer
	deathNews []ID

	pending map[ID]*pending // joins this PoP proposes (origin)
	carry   []Proposal      // proposals of others riding the ping held here

	rtt     map[ID]time.Duration // smoothed link RTT to each peer
	scratch Links                // nearest's buffer, reused every round
	server  float64
	stats   Stats
}

func newNode(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Node{cfg: cfg, view: map[ID]*Entry{}, sent: map[ID]sentVer{}, pending: map[ID]*pending{},
		rtt: map[ID]time.Duration{}, server: 1}, nil
}

// NewFounder starts the first PoP of a new ring: a member from the start,
// holding both tokens (nb_ping = 1, nb_pong = −1, SPEC §5).
func NewFounder(cfg Config, now time.Time) (*Node, error) {
	n, err := newNode(cfg)
	if err != nil {
		return nil, err
	}
	n.view[cfg.Self] = &Entry{ID: cfg.Self, Name: cfg.Name, Addr: cfg.Addr, Gateway: cfg.Gateway, Inc: 1, Alive: true,
		Version: 1, MetaVer: 1, heard: now}
	n.joined, n.joinedAt, n.lastToken = true, now, now
	n.havePing, n.havePong, n.ping, n.pong = true, true, 1, -1
	n.pingDue, n.pongDue = now.Add(cfg.Hold), now.Add(cfg.Hold)
	return n, nil
}

// SetProof sets the proof this PoP presents when it joins again (rejoin:
// declared dead, or its ring dissolving into a larger one after a
// partition): a founder is given none at its start, yet may have to join
// the others' ring later like any PoP.
func (n *Node) SetProof(proof []byte) { n.proof = slices.Clone(proof) }

// NewJoiner starts a PoP that joins an existing ring through the contacts
// (peer addresses), with proof for Config.Accept. It returns the join
// request to send.
func NewJoiner(cfg Config, contacts []string, proof []byte, now time.Time) (*Node, []Msg, error) {
	if len(contacts) == 0 {
		return nil, nil, fmt.Errorf("mbpp: a joiner needs at least one contact")
	}
	n, err := newNode(cfg)
	if err != nil {
		return nil, nil, err
	}
	n.contacts, n.proof = slices.Clone(contacts), slices.Clone(proof)
	return n, n.sendJoin(now), nil
}

func (n *Node) sendJoin(now time.Time) []Msg {
	n.joinDue = now.Add(n.cfg.JoinTimeout)
	addr := n.contacts[n.contact%len(n.contacts)]
	n.contact++
	return []Msg{n.count(Msg{Kind: KindJoin, From: n.cfg.Self, ToAddr: addr, Proposals: []Proposal{{
		ID: n.cfg.Self, Name: n.cfg.Name, Addr: n.cfg.Addr, Proof: n.proof}}})}
}

func (n *Node) count(m Msg) Msg {
	n.stats.MsgsOut++
	n.stats.EntriesOut += uint64(len(m.Entries))
	return m
}

func (n *Node) inc() uint32 {
	if e := n.view[n.cfg.Self]; e != nil {
		return e.Inc
	}
	return 0
}

// Joined reports whether this PoP is a member of the ring.
func (n *Node) Joined() bool { return n.joined }

// Refused returns the reason a join was refused, or "".
func (n *Node) Refused() string { return n.refused }

// Stats returns the counters.
func (n *Node) Stats() Stats { return n.stats }

// ID returns this PoP's ID.
func (n *Node) ID() ID { return n.cfg.Self }

// SampleRTT feeds a link delay sample to peer (from TCP_INFO or a probe); it
// is smoothed with the learning factor A (seed 003 §2 (2)).
func (n *Node) SampleRTT(peer ID, rtt time.Duration) {
	if peer == n.cfg.Self || rtt <= 0 {
		return
	}
	old, ok := n.rtt[peer]
	if !ok {
		n.rtt[peer] = rtt
		return
	}
	a := n.cfg.LearningFactor
	n.rtt[peer] = time.Duration((1-a)*float64(old) + a*float64(rtt))
}

// SetServer sets this PoP's server performance in [0,1] (1 = idle), from its
// content manager (seed 003 §3.2).
func (n *Node) SetServer(v float64) { n.server = clamp01(v) }

// Members returns the alive PoPs of this PoP's view in ring order.
func (n *Node) Members() []ID { return slices.Clone(n.members()) }

// MemberCount is len(Members()) without the copy: the simulator asks it of
// every PoP every virtual second while 1,000 PoPs join.
func (n *Node) MemberCount() int { return len(n.members()) }

func (n *Node) members() []ID {
	if n.ring == nil {
		n.ring = make([]ID, 0, len(n.view))
		for id, e := range n.view {
			if e.Alive {
				n.ring = append(n.ring, id)
			}
		}
		slices.Sort(n.ring)
	}
	return n.ring
}

// neighbour returns the next alive PoP after (dir=+1) or before (dir=−1)
// this one on the ring; itself when alone.
func (n *Node) neighbour(dir int) ID {
	r := n.members()
	i, ok := slices.BinarySearch(r, n.cfg.Self)
	if !ok || len(r) == 0 {
		return n.cfg.Self
	}
	return r[(i+dir+len(r))%len(r)]
}

// Successor is where the ping goes next.
func (n *Node) Successor() ID { return n.neighbour(1) }

// Predecessor is where the pong goes next.
func (n *Node) Predecessor() ID { return n.neighbour(-1) }

// Alive reports whether id is alive in this PoP's view.
func (n *Node) Alive(id ID) bool { e := n.view[id]; return e != nil && e.Alive }

// Next returns the earliest time Tick has something to do.
func (n *Node) Next() time.Time {
	var t time.Time
	at := func(d time.Time) {
		if !d.IsZero() && (t.IsZero() || d.Before(t)) {
			t = d
		}
	}
	if !n.joined {
		if n.refused == "" {
			at(n.joinDue)
		}
		return t
	}
	if n.havePing {
		at(n.pingDue)
	}
	if n.havePong {
		at(n.pongDue)
	}
	for i := range n.out {
		if n.out[i].active {
			at(n.out[i].deadline)
		}
	}
	at(n.watchdogDue())
	at(n.healDueAt())
	return t
}

func (n *Node) watchdogDue() time.Time {
	r := n.members()
	if len(r) < 2 || n.havePing || n.havePong {
		return time.Time{}
	}
	rank, _ := slices.BinarySearch(r, n.cfg.Self)
	round := n.cfg.Round(len(r), n.cfg.AckTimeout)
	return n.lastToken.Add(time.Duration(n.cfg.WatchdogRounds)*round + time.Duration(rank)*n.cfg.Hold)
}

// Tick runs the timers due at now: passing held tokens on, sending again
// unacked ones (and declaring a silent neighbour failed), the watchdog and a
// joiner's retry.
func (n *Node) Tick(now time.Time) []Msg {
	var out []Msg
	if !n.joined {
		if n.refused == "" && !n.joinDue.IsZero() && !now.Before(n.joinDue) {
			out = append(out, n.sendJoin(now)...)
		}
		return out
	}
	for k := range n.out {
		o := &n.out[k]
		if !o.active || now.Before(o.deadline) {
			continue
		}
		if o.tries < n.cfg.Retries {
			o.tries++
			o.deadline = now.Add(n.cfg.AckTimeout)
			n.stats.Retransmits++
			out = append(out, n.count(o.msg))
			continue
		}
		// The neighbour is silent: drop it and give the token to the next.
		o.active = false
		n.declare(o.msg.To, now)
		if o.msg.Kind == KindPing {
			n.havePing, n.ping, n.pingDue = true, o.msg.Nb, now
			n.carry = append(n.carry, n.unmine(o.msg.Proposals)...)
		} else {
			n.havePong, n.pong, n.pongDue = true, o.msg.Nb, now
		}
	}
	if d := n.watchdogDue(); !d.IsZero() && !now.Before(d) {
		v := max(n.maxPing, -n.minPong, n.m, -n.m, n.lastPingSent, -n.lastPongSent) + 1
		n.havePing, n.havePong, n.ping, n.pong = true, true, v, -v
		n.pingDue, n.pongDue, n.lastToken = now, now, now
		n.stats.WatchdogRegen++
	}
	if n.havePing && !now.Before(n.pingDue) {
		out = append(out, n.sendPing(now)...)
	}
	if n.havePong && !now.Before(n.pongDue) {
		out = append(out, n.sendPong(now)...)
	}
	return append(out, n.probe(now)...)
}

// unmine returns the proposals of others; this PoP's own go back to pending.
func (n *Node) unmine(ps []Proposal) []Proposal {
	var others []Proposal
	for _, p := range ps {
		if p.Origin == n.cfg.Self {
			if q := n.pending[p.ID]; q != nil {
				q.out = false
			}
			continue
		}
		others = append(others, p)
	}
	return others
}

func (n *Node) declare(id ID, now time.Time) {
	e := n.view[id]
	if e == nil || !e.Alive || id == n.cfg.Self {
		return
	}
	e.Alive = false
	e.Version++
	e.heard = now
	n.ring = nil
	n.deathNews = append(n.deathNews, id)
	delete(n.rtt, id)
	n.stats.Declared++
}

func (n *Node) sendPing(now time.Time) []Msg {
	to := n.Successor()
	if to == n.cfg.Self {
		// Alone: the ping's cycle is this PoP alone.
		n.refresh(now)
		n.pingDue = now.Add(n.cfg.Hold)
		n.lastToken = now
		n.stats.Cycles++
		return n.cycleDone(now, n.takeProposals(now))
	}
	if to != n.sentTo {
		n.sentTo, n.sent = to, map[ID]sentVer{}
	}
	m := Msg{Kind: KindPing, From: n.cfg.Self, To: to, ToAddr: n.view[to].Addr, Nb: n.ping, Inc: n.inc()}
	var vers []idVer
	for _, e := range n.view {
		s, known := n.sent[e.ID]
		if known && s.inc == e.Inc && s.ver >= e.Version {
			continue
		}
		m.Entries = append(m.Entries, e.delta(s.inc, s.ver, known))
		vers = append(vers, idVer{e.ID, sentVer{e.Inc, e.Version}})
	}
	m.Proposals = n.takeProposals(now)
	n.havePing, n.lastPingSent, n.lastPingTo = false, n.ping, to
	n.out[0] = outstanding{active: true, msg: m, deadline: now.Add(n.cfg.AckTimeout), vers: vers}
	return []Msg{n.count(m)}
}

// takeProposals returns the proposals riding on with the ping: those of
// others and this PoP's pending joins not yet out.
func (n *Node) takeProposals(now time.Time) []Proposal {
	ps := n.carry
	n.carry = nil
	for _, p := range n.pending {
		if !p.out {
			p.out, p.outAt = true, now
			q := p.proposal
			q.Origin, q.Accepts, q.Rejected, q.Reason = n.cfg.Self, 0, false, ""
			ps = append(ps, q)
		}
	}
	slices.SortFunc(ps, func(a, b Proposal) int { return cmp.Compare(a.ID, b.ID) })
	return ps
}

func (n *Node) sendPong(now time.Time) []Msg {
	to := n.Predecessor()
	if to == n.cfg.Self {
		n.pongDue = now.Add(n.cfg.Hold)
		return nil
	}
	m := Msg{Kind: KindPong, From: n.cfg.Self, To: to, ToAddr: n.view[to].Addr, Nb: n.pong, Inc: n.inc()}
	// Deaths ride the pong as well, so they spread both ways round.
	for _, id := range n.deathNews {
		if e := n.view[id]; e != nil && !e.Alive {
			m.Entries = append(m.Entries, Entry{ID: id, Inc: e.Inc, Version: e.Version})
		}
	}
	n.deathNews = nil
	n.havePong, n.lastPongSent, n.lastPongTo = false, n.pong, to
	n.out[1] = outstanding{active: true, msg: m, deadline: now.Add(n.cfg.AckTimeout)}
	return []Msg{n.count(m)}
}

// nearest returns the links this PoP publishes, sorted by peer: its
// measured links to alive peers, only the PublishLinks nearest of them
// when that is set (ties broken by ID, so every run picks the same).
func (n *Node) nearest() Links {
	k := n.cfg.PublishLinks
	buf := n.scratch[:0]
	for peer, rtt := range n.rtt {
		if !n.Alive(peer) {
			continue
		}
		c := Link{Peer: peer, RTT: rtt}
		if k <= 0 {
			buf = append(buf, c)
			continue
		}
		// buf holds the k nearest so far, nearest first: most peers
		// are rejected by one comparison with the farthest kept.
		if len(buf) == k && !closer(c, buf[k-1]) {
			continue
		}
		i, _ := slices.BinarySearchFunc(buf, c, func(a, b Link) int {
			if closer(a, b) {
				return -1
			}
			if closer(b, a) {
				return 1
			}
			return 0
		})
		if len(buf) < k {
			buf = append(buf, Link{})
		}
		copy(buf[i+1:], buf[i:len(buf)-1])
		buf[i] = c
	}
	slices.SortFunc(buf, func(a, b Link) int { return cmp.Compare(a.Peer, b.Peer) })
	n.scratch = buf
	return buf
}

func closer(a, b Link) bool { return a.RTT < b.RTT || a.RTT == b.RTT && a.Peer < b.Peer }

// refresh updates this PoP's own entry from its measurements; the version
// moves only for changes beyond the deadbands (delta encoding).
func (n *Node) refresh(now time.Time) {
	e := n.view[n.cfg.Self]
	if e == nil {
		return
	}
	next := e.Version + 1
	changed := false
	pub := n.nearest()
	var upd Links
	for _, c := range pub {
		l, ok := e.Links.Get(c.Peer)
		if ok && math.Abs(float64(c.RTT-l.RTT)) <= n.cfg.RTTDeadband*float64(l.RTT) {
			continue
		}
		upd = append(upd, Link{Peer: c.Peer, RTT: c.RTT, Ver: next})
	}
	if len(upd) > 0 {
		e.Links, _ = mergeLinks(e.Links, upd)
		changed = true
	}
	// Links to dead peers, and to peers no longer among the nearest, leave;
	// the next deltas carry the whole set so that the copies drop them too.
	before := len(e.Links)
	e.Links = slices.DeleteFunc(e.Links, func(l Link) bool {
		_, ok := slices.BinarySearchFunc(pub, l.Peer, func(c Link, p ID) int { return cmp.Compare(c.Peer, p) })
		return !ok
	})
	if len(e.Links) < before {
		e.LinkSetVer, changed = next, true
	}
	if e.Gateway != n.cfg.Gateway {
		e.Gateway, e.MetaVer, changed = n.cfg.Gateway, next, true
	}
	if e.ServerVer == 0 || math.Abs(n.server-e.Server) > n.cfg.ServerDeadband {
		e.Server, e.ServerVer, changed = n.server, next, true
	}
	if changed {
		e.Version = next
		e.heard = now
	}
}

// Handle processes one received message and returns the messages to send.
func (n *Node) Handle(now time.Time, m Msg) []Msg {
	switch m.Kind {
	case KindPing, KindPong:
		if !n.joined {
			return nil // not a member: stay silent, the sender will route round us
		}
		ack := Msg{Kind: KindAck, AckOf: m.Kind, From: n.cfg.Self, To: m.From, Nb: m.Nb}
		e := n.view[m.From]
		if e != nil {
			ack.ToAddr = e.Addr
			if !e.Alive && m.Inc <= e.Inc {
				// The sender was declared failed but does not know it:
				// tell it, so that it rejoins, and ignore its token.
				ack.Entries = []Entry{{ID: e.ID, Inc: e.Inc, Version: e.Version}}
				return []Msg{n.count(ack)}
			}
		}
		out := []Msg{n.count(ack)}
		if m.Kind == KindPing {
			out = append(out, n.onPing(now, m)...)
		} else {
			out = append(out, n.onPong(now, m)...)
		}
		return out
	case KindAck:
		k := 0
		if m.AckOf == KindPong {
			k = 1
		}
		if o := &n.out[k]; o.active && o.msg.To == m.From && o.msg.Nb == m.Nb {
			o.active = false
			if k == 0 && m.From == n.sentTo {
				for _, iv := range o.vers {
					id, v := iv.id, iv.v
					if s, ok := n.sent[id]; !ok || s.inc != v.inc || s.ver < v.ver {
						n.sent[id] = v
					}
				}
			}
			// Acked: the copy kept for sending again goes, or every PoP
			// would hold its last ping (up to the whole list) for a round.
			*o = outstanding{}
		}
		if n.joined && len(m.Entries) > 0 {
			return n.mergeListFrom(now, m.Entries, m.From)
		}
	case KindJoin:
		return n.onJoin(now, m)
	case KindProbe:
		return n.onProbe(now, m)
	case KindWelcome:
		if n.joined || n.refused != "" {
			return nil
		}
		n.view = map[ID]*Entry{}
		for i := range m.Entries {
			d := &m.Entries[i]
			e := &Entry{ID: d.ID}
			merge(e, d)
			e.heard = now
			n.view[d.ID] = e
		}
		if e := n.view[n.cfg.Self]; e == nil || !e.Alive {
			return nil
		}
		n.ring, n.joined, n.joinedAt, n.lastToken = nil, true, now, now
		n.sentTo, n.sent = 0, map[ID]sentVer{}
	case KindRefuse:
		if !n.joined {
			n.refused = m.Reason
			if n.refused == "" {
				n.refused = "refused"
			}
		}
	}
	return nil
}

func (n *Node) onJoin(now time.Time, m Msg) []Msg {
	if len(m.Proposals) != 1 {
		return nil
	}
	p := m.Proposals[0]
	if !n.joined {
		// Not a member (yet): stay silent, and the joiner's retry tries its
		// next contact. A refusal would be final, and two PoPs rejoining
		// after a partition, each the other's contact, would stay out.
		return nil
	}
	if p.ID == n.cfg.Self || p.ID == 0 {
		return []Msg{n.count(Msg{Kind: KindRefuse, From: n.cfg.Self, ToAddr: p.Addr, Reason: fmt.Sprintf("id %x is in use", p.ID)})}
	}
	if q := n.pending[p.ID]; q != nil {
		q.proposal = p // a retry: keep its place
		// A proposal out for longer than two generous rounds rode a
		// ping that was lost or dropped as an old copy: send it again
		// (a late copy coming back finds no pending entry and is ignored).
		if q.out && now.Sub(q.outAt) > 2*n.cfg.Round(len(n.members()), n.cfg.AckTimeout) {
			q.out = false
		}
		return nil
	}
	n.pending[p.ID] = &pending{proposal: p}
	return nil
}

func (n *Node) onPing(now time.Time, m Msg) []Msg {
	nb := m.Nb
	if nb <= n.maxPing {
		// An old or duplicated token is dropped, but the list it
		// carries is still news: the sender counts it delivered once
		// acked, so ignoring it would lose entries for good.
		n.stats.Duplicates++
		return n.mergeList(now, m.Entries)
	}
	n.maxPing = nb
	n.stats.PingsIn++
	n.lastToken = now
	n.out[0] = outstanding{} // a newer ping supersedes one we are still sending
	if nb == n.m {
		// The ping came back and no pong passed: the pong is lost.
		nb++
		n.havePong, n.pong, n.pongDue = true, -nb, now
		n.stats.PongRegen++
	} else if n.havePong || (n.lastPongTo == m.From && n.lastPongSent == -nb) {
		// The tokens met here or crossed on the link to the sender.
		nb++
		n.stats.Meets++
		if n.havePong {
			n.pong--
		}
		n.m = nb
	} else {
		n.m = nb
	}
	n.havePing, n.ping, n.pingDue = true, nb, now.Add(n.cfg.Hold)
	n.stats.Cycles++
	var out []Msg
	out = append(out, n.mergeList(now, m.Entries)...)
	if !n.joined {
		return out
	}
	out = append(out, n.onProposals(now, m.Proposals)...)
	n.refresh(now)
	return out
}

func (n *Node) onPong(now time.Time, m Msg) []Msg {
	nb := m.Nb
	if nb >= n.minPong {
		n.stats.Duplicates++
		return n.mergeList(now, m.Entries)
	}
	n.minPong = nb
	n.stats.PongsIn++
	n.lastToken = now
	n.out[1] = outstanding{}
	if nb == n.m {
		// The pong came back and no ping passed: the ping is lost.
		nb--
		n.havePing, n.ping, n.pingDue = true, -nb, now
		n.stats.PingRegen++
	} else if n.havePing || (n.lastPingTo == m.From && n.lastPingSent == -nb) {
		nb--
		n.stats.Meets++
		if n.havePing {
			n.ping++
		}
		n.m = nb
	} else {
		n.m = nb
	}
	n.havePong, n.pong, n.pongDue = true, nb, now.Add(n.cfg.Hold)
	return n.mergeList(now, m.Entries)
}

// mergeList folds received entries into the view. If this PoP finds itself
// declared dead it leaves the ring and joins again.
func (n *Node) mergeList(now time.Time, es []Entry) []Msg { return n.mergeListFrom(now, es, 0) }

// mergeListFrom is mergeList for entries PoP from sent: a PoP that finds
// itself declared dead joins again through from first, which holds it dead
// and so belongs to the ring that declared it (after a partition, the
// PoP's own ring may be the one about to dissolve).
func (n *Node) mergeListFrom(now time.Time, es []Entry, from ID) []Msg {
	for i := range es {
		d := &es[i]
		if d.ID == n.cfg.Self {
			if self := n.view[n.cfg.Self]; self != nil && d.Inc >= self.Inc && !d.Alive {
				via := ""
				if e := n.view[from]; e != nil && from != n.cfg.Self {
					via = e.Addr
				}
				return n.rejoin(now, via)
			}
			continue
		}
		e := n.view[d.ID]
		if e == nil {
			if !d.HasMeta {
				continue // a death or change of a PoP we never heard of
			}
			e = &Entry{ID: d.ID}
			n.view[d.ID] = e
		}
		wasAlive := e.Alive
		if merge(e, d) {
			e.heard = now
			if wasAlive != e.Alive {
				n.ring = nil
				if !e.Alive {
					n.deathNews = append(n.deathNews, e.ID)
					delete(n.rtt, e.ID)
				}
			}
		}
	}
	return nil
}

// rejoin is taken by a PoP the others declared failed (it was cut off), or
// whose ring dissolves into a larger one (heal.go): it drops its tokens and
// joins again, through via first ("" for none), then the PoPs it knows.
func (n *Node) rejoin(now time.Time, via string) []Msg {
	n.stats.Rejoins++
	var contacts []string
	if via != "" {
		contacts = append(contacts, via)
	}
	for _, id := range n.members() {
		if id != n.cfg.Self {
			contacts = append(contacts, n.view[id].Addr)
		}
	}
	contacts = append(contacts, n.contacts...)
	*n = Node{cfg: n.cfg, view: map[ID]*Entry{}, sent: map[ID]sentVer{}, pending: map[ID]*pending{},
		rtt: n.rtt, server: n.server, stats: n.stats, contacts: contacts, proof: n.proof,
		maxPing: n.maxPing, minPong: n.minPong}
	if len(contacts) == 0 {
		n.refused = "declared failed and no PoP left to rejoin through"
		return nil
	}
	return n.sendJoin(now)
}

func (n *Node) onProposals(now time.Time, ps []Proposal) []Msg {
	var mine []Proposal
	for _, p := range ps {
		if p.Origin == n.cfg.Self {
			mine = append(mine, p)
			continue
		}
		if !n.Alive(p.Origin) {
			continue // its origin is gone; the newcomer will retry elsewhere
		}
		if !p.Rejected && p.ID != n.cfg.Self {
			if n.cfg.Accept != nil {
				if err := n.cfg.Accept(p); err != nil {
					p.Rejected, p.Reason = true, fmt.Sprintf("PoP %x: %v", n.cfg.Self, err)
					n.stats.ProposalsRejected++
				}
			}
			if !p.Rejected {
				p.Accepts++
			}
		}
		n.carry = append(n.carry, p)
	}
	return n.cycleDone(now, mine)
}

// cycleDone handles this PoP's own proposals that came back: commit the
// ones every other PoP accepted, refuse the rejected, retry the rest.
func (n *Node) cycleDone(now time.Time, mine []Proposal) []Msg {
	var out, welcome []Proposal
	// Every other member must have accepted: count them before this
	// batch's commits change the membership.
	batch := map[ID]bool{}
	for _, p := range mine {
		batch[p.ID] = true
	}
	need := 0
	for _, id := range n.members() {
		if id != n.cfg.Self && !batch[id] {
			need++
		}
	}
	for _, p := range mine {
		q := n.pending[p.ID]
		if q == nil {
			continue
		}
		switch {
		case p.Rejected:
			delete(n.pending, p.ID)
			n.stats.JoinsRefused++
			out = append(out, p)
		case int(p.Accepts) >= need:
			delete(n.pending, p.ID)
			n.commit(now, p)
			welcome = append(welcome, p)
		default:
			q.out = false // the ring changed under it: go round again
		}
	}
	// Welcomes after all commits, so each newcomer's list has the others.
	var msgs []Msg
	for _, p := range out {
		msgs = append(msgs, n.count(Msg{Kind: KindRefuse, From: n.cfg.Self, To: p.ID, ToAddr: p.Addr, Reason: p.Reason}))
	}
	for _, p := range welcome {
		msgs = append(msgs, n.welcome(p))
	}
	return msgs
}

func (n *Node) commit(now time.Time, p Proposal) {
	inc := uint32(1)
	if e := n.view[p.ID]; e != nil {
		inc = e.Inc + 1
	}
	n.view[p.ID] = &Entry{ID: p.ID, Name: p.Name, Addr: p.Addr, Inc: inc, Alive: true, Version: 1, MetaVer: 1,
		heard: now}
	n.ring = nil
	n.stats.JoinsCommitted++
}

func (n *Node) welcome(p Proposal) Msg {
	m := Msg{Kind: KindWelcome, From: n.cfg.Self, To: p.ID, ToAddr: p.Addr}
	for _, e := range n.view {
		m.Entries = append(m.Entries, e.delta(0, 0, false))
	}
	return n.count(m)
}
