package mbpp

import (
	"cmp"
	"slices"
	"time"
)

// ID identifies a PoP and orders the ring. internal/cdn/pop derives it from the
// PoP's name with the same hash as internal/cdn/chord, so both rings agree.
type ID uint64

// Link is one measured link of an entry: the smoothed RTT from the entry's PoP
// to Peer (seed 003 §2 (1)–(2): delay is the only link metric).
type Link struct {
	Peer ID
	RTT  time.Duration
	Ver  uint64 // entry version at which it last changed (delta encoding)
}

// Links are an entry's links sorted by peer, at most one per peer. A sorted
// slice rather than a map: every PoP holds every entry, so N PoPs in one
// simulator hold N² entries of up to N links each, and a map's buckets and
// headers cost more than twice the links themselves (at 1,000 PoPs).
type Links []Link

func (ls Links) find(peer ID) (int, bool) {
	return slices.BinarySearchFunc(ls, peer, func(l Link, p ID) int { return cmp.Compare(l.Peer, p) })
}

// Get returns the link to peer.
func (ls Links) Get(peer ID) (Link, bool) {
	if i, ok := ls.find(peer); ok {
		return ls[i], true
	}
	return Link{}, false
}

// mergeLinks folds the sorted links d into the sorted links e: a link
// replaces e's link to the same peer when its version is newer, a link to a
// new peer is added. e is updated in place when no peer is new (the common
// case once the links are known); otherwise a new slice of exactly the
// right length is returned. It reports whether anything changed.
func mergeLinks(e, d Links) (Links, bool) {
	changed, missing := false, 0
	for _, l := range d {
		if i, ok := e.find(l.Peer); !ok {
			missing++
		} else if l.Ver > e[i].Ver {
			e[i], changed = l, true
		}
	}
	if missing == 0 {
		return e, changed
	}
	out := make(Links, 0, len(e)+missing)
	i, j := 0, 0
	for i < len(e) || j < len(d) {
		switch {
		case j == len(d) || i < len(e) && e[i].Peer < d[j].Peer:
			out = append(out, e[i])
			i++
		case i == len(e) || d[j].Peer < e[i].Peer:
			out = append(out, d[j])
			j++
		default: // the same peer: updated in place above
			out = append(out, e[i])
			i++
			j++
		}
	}
	return out, true
}

// normalise sorts links by peer and keeps, of several links to one peer,
// the newest: what a decoder must do with links from the wire.
func (ls Links) normalise() Links {
	if slices.IsSortedFunc(ls, func(a, b Link) int { return cmp.Compare(a.Peer, b.Peer) }) {
		ok := true
		for i := 1; i < len(ls); i++ {
			if ls[i].Peer == ls[i-1].Peer {
				ok = false
				break
			}
		}
		if ok {
			return ls
		}
	}
	slices.SortStableFunc(ls, func(a, b Link) int {
		if c := cmp.Compare(a.Peer, b.Peer); c != 0 {
			return c
		}
		return cmp.Compare(b.Ver, a.Ver) // newest first
	})
	return slices.CompactFunc(ls, func(a, b Link) bool { return a.Peer == b.Peer })
}

// Entry is one PoP's line of the performance list, F(x) of seed 003 §2: its
// link performance to each peer and its server performance. Only the owner
// changes Links and Server; anyone may mark it dead. Versions make the list
// mergeable and let a sender send only what changed.
type Entry struct {
	ID         ID
	Name, Addr string
	// Gateway is the PoP's client-facing addresses (Config.Gateway), part
	// of the meta with Name and Addr: what the DNS answers for it.
	Gateway string
	// Inc is the incarnation: a PoP that rejoins gets a higher one, which
	// overrides the dead mark of the previous one.
	Inc   uint32
	Alive bool
	// Version grows with every change; MetaVer and ServerVer record when
	// the name/address and the server performance last changed.
	Version, MetaVer, ServerVer uint64
	// Server is the server performance in [0,1], 1 = idle (seed 003 §3.2:
	// reported by the PoP's content manager).
	Server float64
	Links  Links
	// LinkSetVer is the version at which the owner last dropped a link
	// (to a dead peer, or one no longer among its PublishLinks nearest).
	// Deltas only add and update links, so a peer that has not seen this
	// version gets the whole set (HasLinkSet) and replaces its copy;
	// without it every copy kept every link ever published.
	LinkSetVer uint64

	// Wire-only flags: which optional parts a delta carries.
	HasMeta, HasServer, HasLinkSet bool

	heard time.Time // local: when this PoP last learned something new of it
}

// delta returns the part of e a peer that last got (inc, ver) lacks; full
// when it had another incarnation.
func (e *Entry) delta(inc uint32, ver uint64, known bool) Entry {
	full := !known || inc != e.Inc
	d := Entry{ID: e.ID, Inc: e.Inc, Alive: e.Alive, Version: e.Version}
	if full || e.MetaVer > ver {
		d.HasMeta, d.Name, d.Addr, d.Gateway, d.MetaVer = true, e.Name, e.Addr, e.Gateway, e.MetaVer
	}
	if full || e.ServerVer > ver {
		d.HasServer, d.Server, d.ServerVer = true, e.Server, e.ServerVer
	}
	if full || e.LinkSetVer > ver {
		d.HasLinkSet, d.LinkSetVer = true, e.LinkSetVer
		d.Links = slices.Clone(e.Links)
		return d
	}
	for _, l := range e.Links {
		if l.Ver > ver {
			d.Links = append(d.Links, l)
		}
	}
	return d
}

// merge folds the delta d into the local entry e and reports whether
// anything changed. A higher incarnation replaces; within one incarnation
// dead wins over alive and each field keeps its newest version.
func merge(e *Entry, d *Entry) bool {
	if d.Inc < e.Inc {
		return false
	}
	if d.Inc > e.Inc {
		*e = Entry{ID: d.ID, Inc: d.Inc}
		e.Alive = d.Alive
		e.Version = 0
	}
	changed := false
	if e.Alive && !d.Alive {
		e.Alive, changed = false, true
	}
	if d.HasMeta && (d.MetaVer > e.MetaVer || e.Name == "" && e.Addr == "") {
		e.Name, e.Addr, e.Gateway, e.MetaVer, changed = d.Name, d.Addr, d.Gateway, d.MetaVer, true
	}
	if d.HasServer && d.ServerVer > e.ServerVer {
		e.Server, e.ServerVer, changed = d.Server, d.ServerVer, true
	}
	if d.HasLinkSet && (d.LinkSetVer > e.LinkSetVer || e.Links == nil) {
		// The whole set as of d.Version: it replaces the copy, except
		// for links this copy already has from later versions.
		keep := slices.DeleteFunc(slices.Clone(e.Links), func(l Link) bool { return l.Ver <= d.Version })
		e.Links, _ = mergeLinks(slices.Clone(d.Links), keep)
		e.LinkSetVer, changed = d.LinkSetVer, true
	} else if links, ch := mergeLinks(e.Links, d.Links); ch {
		e.Links, changed = links, true
	}
	if d.Version > e.Version {
		e.Version, changed = d.Version, true
	}
	return changed
}

// PeerView is one line of a PoP's view, as the admin API shows it.
type PeerView struct {
	ID   ID     `json:"id"`
	Name string `json:"name"`
	Addr string `json:"addr"`
	// Gateway is the entry's client-facing addresses (comma-separated).
	Gateway string        `json:"gateway,omitempty"`
	Alive   bool          `json:"alive"`
	Inc     uint32        `json:"incarnation"`
	RTT     time.Duration `json:"-"`
	RTTms   float64       `json:"rtt_ms"`
	// Estimated is set when RTT is Config.EstimateRTT's estimate, not a
	// measurement.
	Estimated bool          `json:"rtt_estimated,omitempty"`
	Server    float64       `json:"server_perf"`
	Score     float64       `json:"score"`
	Age       time.Duration `json:"-"`
	AgeS      float64       `json:"age_s"`
	Self      bool          `json:"self"`
}

// score is serv of seed 003 §2 (5) for peer e seen from this PoP.
func (n *Node) score(e *Entry, rtt time.Duration, haveRTT bool) float64 {
	return Score(&n.cfg, e.ID == n.cfg.Self, e.Alive, rtt, haveRTT, e.Server)
}

// Score is serv of seed 003 §2 (5) under the constants of c: the normalised
// weighted sum of link performance (RTTRef/(RTTRef+rtt); 0 when no RTT is
// known) and server performance, plus the local bonus of §2 (4) for the PoP
// itself (self); 0 for a dead PoP. It is exported so that other views of the
// same PoPs (the simulator's gossip baseline) rank them by the same rule.
func Score(c *Config, self, alive bool, rtt time.Duration, haveRTT bool, server float64) float64 {
	if !alive {
		return 0
	}
	link := 0.0
	if self {
		link = 1
	} else if haveRTT {
		link = float64(c.RTTRef) / float64(c.RTTRef+rtt)
	}
	s := (c.WeightLink*link + c.WeightServer*server) / (c.WeightLink + c.WeightServer)
	if self {
		s += c.LocalBonus
	}
	return s
}

// RTTTo is the smoothed link RTT from this PoP to peer as routing uses it:
// its own measurement, else the peer's measurement of the way back.
func (n *Node) RTTTo(peer ID) (time.Duration, bool) { return n.rttTo(peer) }

// rttTo is the link RTT from this PoP to peer: its own measurement (seed 003
// §3.2: the gateway routes by what it measures, published or not), else
// the peer's measurement of the way back (RTT is symmetric).
func (n *Node) rttTo(peer ID) (time.Duration, bool) {
	if r, ok := n.rtt[peer]; ok && n.Alive(peer) {
		return r, true
	}
	if self := n.view[n.cfg.Self]; self != nil {
		if l, ok := self.Links.Get(peer); ok {
			return l.RTT, true
		}
	}
	if e := n.view[peer]; e != nil {
		if l, ok := e.Links.Get(n.cfg.Self); ok {
			return l.RTT, true
		}
	}
	return 0, false
}

// routeRTT is the link RTT routing ranks peer by: 0 for this PoP, its
// measurement (rttTo), else with Config.EstimateRTT the estimate (est set).
func (n *Node) routeRTT(peer ID) (rtt time.Duration, ok, est bool) {
	if peer == n.cfg.Self {
		return 0, true, false
	}
	if rtt, ok = n.rttTo(peer); ok || !n.cfg.EstimateRTT {
		return rtt, ok, false
	}
	rtt, ok = n.EstimateRTT(peer)
	return rtt, ok, ok
}

// EstimateRTT estimates the RTT to a peer this PoP has not measured from
// the view: the shortest path through one live PoP x it has measured, its
// own RTT to x plus the link between x and the peer that x or the peer
// publishes (each PoP publishes its PublishLinks nearest, so x is a PoP
// near the peer that this PoP happens to know). It is an upper bound when
// delays obey the triangle inequality, and nearly exact for a peer next to
// a measured PoP; ok is false when no such path is in the view.
func (n *Node) EstimateRTT(peer ID) (time.Duration, bool) {
	pe := n.view[peer]
	best, found := time.Duration(0), false
	for x, r := range n.rtt {
		if x == peer || !n.Alive(x) {
			continue
		}
		l, ok := Link{}, false
		if e := n.view[x]; e != nil {
			l, ok = e.Links.Get(peer)
		}
		if !ok && pe != nil {
			l, ok = pe.Links.Get(x)
		}
		if ok && (!found || r+l.RTT < best) {
			best, found = r+l.RTT, true
		}
	}
	return best, found
}

// View returns this PoP's performance view, ordered by ID.
func (n *Node) View(now time.Time) []PeerView {
	out := make([]PeerView, 0, len(n.view))
	for _, e := range n.view {
		rtt, ok, est := n.routeRTT(e.ID)
		v := PeerView{ID: e.ID, Name: e.Name, Addr: e.Addr, Gateway: e.Gateway, Alive: e.Alive, Inc: e.Inc, RTT: rtt,
			RTTms: float64(rtt) / 1e6, Estimated: est, Server: e.Server, Score: n.score(e, rtt, ok), Self: e.ID == n.cfg.Self}
		if !e.heard.IsZero() {
			v.Age = now.Sub(e.heard)
			v.AgeS = v.Age.Seconds()
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b PeerView) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Peer returns one line of this PoP's view (as View gives it) without
// building the whole view: routing asks it for each candidate PoP.
func (n *Node) Peer(id ID, now time.Time) (PeerView, bool) {
	e := n.view[id]
	if e == nil {
		return PeerView{}, false
	}
	rtt, ok, est := n.routeRTT(id)
	v := PeerView{ID: id, Name: e.Name, Addr: e.Addr, Gateway: e.Gateway, Alive: e.Alive, Inc: e.Inc, RTT: rtt,
		RTTms: float64(rtt) / 1e6, Estimated: est, Server: e.Server, Score: n.score(e, rtt, ok), Self: id == n.cfg.Self}
	if !e.heard.IsZero() {
		v.Age = now.Sub(e.heard)
		v.AgeS = v.Age.Seconds()
	}
	return v, true
}

// LinkRTT is the link RTT between PoPs a and b as this PoP's view knows it:
// its own measurement when one of them is this PoP, else a's published
// link to b, else b's to a (RTT is symmetric). A PoP publishes only its
// PublishLinks nearest links, so two PoPs far apart often have none.
func (n *Node) LinkRTT(a, b ID) (time.Duration, bool) {
	switch {
	case a == b:
		return 0, true
	case a == n.cfg.Self:
		return n.rttTo(b)
	case b == n.cfg.Self:
		return n.rttTo(a)
	}
	if e := n.view[a]; e != nil {
		if l, ok := e.Links.Get(b); ok {
			return l.RTT, true
		}
	}
	if e := n.view[b]; e != nil {
		if l, ok := e.Links.Get(a); ok {
			return l.RTT, true
		}
	}
	return 0, false
}

// ScoreFrom is serv of PoP to as PoP from would compute it (seed 003 §2 (5)
// with from's local preference, §2 (4)), from this PoP's view: to's server
// performance and the link between them (LinkRTT; no known link counts as
// no link performance, which only far PoPs lack). Routing a client uses it
// from the client's nearest PoP rather than from whichever PoP answered;
// 0 for a PoP not in the view or dead.
func (n *Node) ScoreFrom(from, to ID) float64 {
	e := n.view[to]
	if e == nil {
		return 0
	}
	rtt, ok := n.LinkRTT(from, to)
	return Score(&n.cfg, from == to, e.Alive, rtt, ok, e.Server)
}
