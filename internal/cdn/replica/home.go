package replica

import (
	"slices"
	"time"

	"shoal/internal/cdn/chord"
)

// Home is the directory a PoP keeps as the home of keys (seed 003 §1: the
// PoP owning a key knows which PoPs hold it): chord.Directory, with the
// rules by which a home takes its holders' registration messages, written
// once for the live PoPs (internal/cdn/pop) and the simulator
// (internal/cdn/cdnsim). Holders name themselves; Home compares names
// only.
type Home struct {
	*chord.Directory
	cfg Config
}

// NewHome returns an empty directory for a home with the replication
// constants cfg (the registrations' TTL is cfg.DirTTL), of at most 2²⁰
// keys with at most 64 holders each.
func NewHome(cfg Config) *Home {
	return &Home{Directory: chord.NewDirectory(1<<20, 64), cfg: cfg}
}

// Apply takes one registration message from holder for key at now: an
// Unregister removes the holder; a Register of a key this home does not
// own (owns false: Chord ownership moved since the holder looked it up) is
// refused, and mine is false, so that the holder looks the key's home up
// again (the live PoPs answer notmine); any other Register lists the
// holder for DirTTL, except the home's own (self), which List adds from
// what the home holds instead: a PoP alone is the home of every key it
// holds, and with an entry per copy `shoal pop`'s memory test grew 104 MiB
// for 200,000 URLs, over its budget of 96 (90.6 MiB without).
func (h *Home) Apply(now time.Time, op Op, key chord.ID, holder string, self, owns bool) (mine bool) {
	switch {
	case op == Unregister:
		h.Remove(key, holder)
	case !owns:
		return false
	case !self:
		h.Add(now, key, holder, h.cfg.DirTTL)
	}
	return true
}

// List is what the home answers for key: the holders registered and, when
// it holds the content itself (selfHolds), itself under the name self, in
// order. The home's own copy is listed so that a miss elsewhere asks the
// home by its score among the holders rather than only as shield after
// all of them (measured with `shoal sim cdn`, 20,000 Zipf requests: a mean
// client RTT of 115.2 ms at 100 PoPs against 119.7 ms with the home left
// out, 147.1 against 153.4 at 10; docs/cdn.md).
func (h *Home) List(now time.Time, key chord.ID, self string, selfHolds bool) []string {
	hs := h.Holders(now, key)
	if selfHolds && !slices.Contains(hs, self) {
		hs = append(hs, self)
		slices.Sort(hs)
	}
	return hs
}

// Lost forgets every entry of the holders gone selects, when they leave
// this home's view (they died, or a partition cut them off): their copies
// cannot be fetched, and each registers again when it comes back. It
// returns how many entries went.
func (h *Home) Lost(gone func(holder string) bool) int { return h.DropHolder(gone) }

// Adopt keeps the entries another home handed over, each with its expiry:
// a PoP that joined before that home (or a partition that healed) made
// this one the keys' home (Chord §4.4: a joining node takes its keys from
// its successor), and lookups reaching it must find their holders at once.
func (h *Home) Adopt(now time.Time, es []chord.Entry) { h.Put(now, es) }
