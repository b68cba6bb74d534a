package mbpp

import (
	"slices"
	"time"
)

// This file heals a partition. Misra's ping-pong keeps one ring turning
// among the PoPs that can reach each other: cut the network in two and
// each side declares the other dead and goes on as a ring of its own
// (SPEC §5's failure detection working as meant). Nothing in the seed's
// protocol brings the two rings back together, since no token crosses from
// one to the other once the links return. So the member with the lowest ID
// of each ring probes, every Config.HealEvery, one PoP its view holds dead
// (each in turn), saying how large its ring is. A probe that reaches a
// member of another ring compares the two: the smaller ring (ties: the one
// whose lowest ID is higher) dissolves into the larger through the normal
// join (seed 003 §3.1: one cycle accepted by every PoP). The member that
// learns it first joins through the other ring's PoP; its old ring's
// tokens then reach it, it answers that their senders are dead (the
// larger ring declared them so), and each joins in turn through the PoP
// that told it (mergeListFrom). The winner only grows and the loser only
// shrinks, so the choice never flips. A probe to a PoP that really died
// goes nowhere: one message of a few dozen bytes per ring per period,
// whatever the number of PoPs, dead or alive.

// ringSig is what a probe says of a ring: its members and the lowest ID
// among them, all two rings need to agree which dissolves.
type ringSig struct {
	n   int
	low ID
}

// wins reports whether ring mine absorbs ring theirs when the two meet:
// more members, or as many and the lowest ID. Two rings with the same
// lowest ID are one ring seen at two moments: neither wins.
func wins(mine, theirs ringSig) bool {
	if mine.n != theirs.n {
		return mine.n > theirs.n
	}
	return mine.n > 0 && mine.low < theirs.low
}

// sig is this PoP's ring's signature.
func (n *Node) sig() ringSig {
	ms := n.members()
	if len(ms) == 0 {
		return ringSig{}
	}
	return ringSig{n: len(ms), low: ms[0]}
}

// healDueAt is when the next probe goes: never while the view holds no
// dead PoP (every entry a member: members is cached, so this costs nothing
// on a steady ring), nor when probing is off or this PoP is not a member.
func (n *Node) healDueAt() time.Time {
	if n.cfg.HealEvery <= 0 || !n.joined || len(n.members()) == len(n.view) || n.sig().low != n.cfg.Self {
		return time.Time{}
	}
	return n.healDue
}

// probeTargets are the PoPs the view holds dead and can address, by ID.
func (n *Node) probeTargets() []ID {
	var out []ID
	for id, e := range n.view {
		if !e.Alive && e.Addr != "" && id != n.cfg.Self {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// probe returns the probe due at now (none if it is not due), to the next
// dead PoP in turn.
func (n *Node) probe(now time.Time) []Msg {
	if n.cfg.HealEvery <= 0 || !n.joined || n.sig().low != n.cfg.Self {
		return nil
	}
	if n.healDue.IsZero() {
		n.healDue = now.Add(n.cfg.HealEvery)
		return nil
	}
	if now.Before(n.healDue) {
		return nil
	}
	n.healDue = now.Add(n.cfg.HealEvery)
	ts := n.probeTargets()
	if len(ts) == 0 {
		return nil
	}
	to := ts[n.healNext%len(ts)]
	n.healNext++
	n.stats.Probes++
	return []Msg{n.ringMsg(to, n.view[to].Addr)}
}

// ringMsg is a probe to id at addr: Nb is the size of this PoP's ring,
// Entries its own entry in full (the receiver learns its address) and,
// when another PoP has the lowest ID, that PoP's ID. A few dozen bytes
// whatever the ring's size, so probing costs O(N) bytes a period across N
// PoPs, not O(N²).
func (n *Node) ringMsg(to ID, addr string) Msg {
	sig := n.sig()
	m := Msg{Kind: KindProbe, From: n.cfg.Self, To: to, ToAddr: addr, Inc: n.inc(), Nb: int64(sig.n)}
	e := n.view[n.cfg.Self]
	m.Entries = append(m.Entries, Entry{ID: e.ID, Inc: e.Inc, Alive: true, HasMeta: true, Name: e.Name, Addr: e.Addr, MetaVer: e.MetaVer})
	if sig.low != n.cfg.Self {
		m.Entries = append(m.Entries, Entry{ID: sig.low, Alive: true})
	}
	return n.count(m)
}

// onProbe handles another ring's probe. A sender this PoP has alive in
// its ring, or a ring whose lowest member is this PoP or alive here, is no
// other ring: ignored. Else the larger ring wins: if it is this one, the
// sender is told (a probe back, with this ring's signature); if it is the
// sender's, this PoP leaves its ring and joins the sender's through the
// sender.
func (n *Node) onProbe(now time.Time, m Msg) []Msg {
	if !n.joined || m.From == n.cfg.Self || n.Alive(m.From) || m.Nb < 1 || len(m.Entries) == 0 || len(m.Entries) > 2 {
		return nil
	}
	theirs := ringSig{n: int(m.Nb), low: m.From}
	addr := ""
	for _, e := range m.Entries {
		if e.ID == n.cfg.Self || n.Alive(e.ID) {
			return nil // the sender's ring overlaps this one: not two rings
		}
		if e.ID == m.From {
			addr = e.Addr
		}
		theirs.low = min(theirs.low, e.ID)
	}
	if addr == "" {
		return nil
	}
	mine := n.sig()
	switch {
	case wins(mine, theirs):
		return []Msg{n.ringMsg(m.From, addr)}
	case wins(theirs, mine):
		n.stats.Merges++
		return n.rejoin(now, addr)
	}
	return nil
}
