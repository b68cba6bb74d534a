// Package replica is the content logic of a PoP in the CDN tier (SPEC §5, seed
// 003 §1 and §3.1), written once for the live PoPs and the simulator: which
// copies a PoP keeps and which it evicts (Store: fewer than M requests in a
// window), which are hot enough to push to every PoP (Store.Roll), where a
// miss is fetched from (Config.Plan: best-scoring holder, the key's home as
// shield, the origin) and where a client is redirected (Better), how the
// Chord directory is kept true from the holder's side (Table.Hold, RegDue:
// register, refresh, move, unregister) and taken at the home (Home: notmine,
// no self-listing, lost holders, hand-over), and purges with their
// tombstones (PurgeLog).
//
// Like internal/cdn/mbpp and internal/cdn/chord it is a pure state machine:
// every call takes the time, nothing reads a clock or does I/O, so `shoal
// pop`, the tests and the CDN simulator (internal/cdn/cdnsim) run the same
// code.
package replica

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Config holds the replication constants; DefaultConfig gives the values.
type Config struct {
	// Window is the counting window of seed 003 §3.1: content requested
	// fewer than MinRequests times in one window is evicted, and the most
	// requested content of a window is pushed to every PoP.
	Window time.Duration
	// MinRequests is M of seed 003 §3.1 ("在一定时间内访问数量少于设定值的
	// 媒体数据将被删除"). A copy younger than one window is kept regardless,
	// so a new copy gets a full window to earn its place.
	MinRequests int
	// HotTop is how many of a window's most requested objects a PoP
	// pushes to every PoP (seed 003 §3.1 "统计传输": hot content is
	// distributed actively); 0 turns hot push off.
	HotTop int
	// HotMin is the fewest requests in a window for an object to be hot,
	// so that a quiet PoP does not push what happened to be asked once.
	HotMin int
	// DirTTL is how long a holder's registration in the key's directory
	// lasts (chord.Directory) unless refreshed.
	DirTTL time.Duration
	// ShieldStretch bounds the detour through the key's home PoP (Plan): a
	// miss nobody holds goes through the home as shield when self→home→
	// origin is at most ShieldStretch × self→origin, else straight to the
	// origin (a shield half a world away would double the client's wait).
	// 0 always takes the shield; an unknown RTT takes it too.
	ShieldStretch float64
	// NearerOrigin leaves out of a miss's plan the holders farther from
	// the PoP than the origin (both RTTs known): the origin answers the
	// client sooner, at the price of an origin fetch the holder would have
	// saved. Off by default (every holder is asked before the origin);
	// what it gains and costs is measured in docs/cdn.md.
	NearerOrigin bool
	// PurgeRetention is how long a purge is kept as a tombstone: a PoP
	// away for less catches up on its return; one away for longer starts
	// over. MaxPurges bounds the log whatever the rate of purges.
	PurgeRetention time.Duration
	MaxPurges      int
	// PurgeMargin is how long after a purge a copy still counts as made
	// before it (PurgeLog.Tombstone): the clock skew tolerated between
	// PoPs and the origin, erring towards a fresh fetch.
	PurgeMargin time.Duration
}

// DefaultConfig returns the defaults: an hour's window (web popularity is
// diurnal; a shorter window evicts what the next hour asks again), M = 1
// (keep what was asked at all), the top 10 pushed when asked ≥ 5 times; a
// shield detour of at most 1.5× the direct path; purges kept a day (longer
// than a PoP is expected to be away and come back with its disk), at most
// 100,000 of them, with 2 s of clock skew tolerated.
func DefaultConfig() Config {
	return Config{Window: time.Hour, MinRequests: 1, HotTop: 10, HotMin: 5, DirTTL: 2 * time.Hour,
		ShieldStretch: 1.5, PurgeRetention: 24 * time.Hour, MaxPurges: 100_000, PurgeMargin: 2 * time.Second}
}

// Validate reports the first value that makes no sense.
func (c Config) Validate() error {
	switch {
	case c.Window <= 0:
		return fmt.Errorf("cdn: window %v must be > 0", c.Window)
	case c.MinRequests < 0, c.HotTop < 0, c.HotMin < 0:
		return fmt.Errorf("cdn: min requests, hot top and hot min must be ≥ 0")
	case c.DirTTL < c.Window:
		return fmt.Errorf("cdn: directory TTL %v shorter than the window %v: holders would vanish between refreshes", c.DirTTL, c.Window)
	case c.ShieldStretch < 0, c.PurgeRetention <= 0, c.MaxPurges < 1, c.PurgeMargin < 0:
		return fmt.Errorf("cdn: shield stretch and purge margin must be ≥ 0, purge retention and max purges > 0")
	}
	return nil
}

// Candidate is a PoP that holds wanted content, as the routing PoP's view
// sees it: Score is MBPP's serv (seed 003 §2 (5)), Alive its liveness, RTT
// the link RTT to it (measured or estimated; 0 when unknown).
type Candidate struct {
	ID    uint64
	Alive bool
	Score float64
	RTT   time.Duration
}

// Rank orders the live candidates best first (highest score; ties by ID so
// that every PoP with the same view picks the same): the order in which a
// miss tries the holders, or the redirect target (the first). Dead ones are
// left out.
func Rank(cs []Candidate) []Candidate {
	out := make([]Candidate, 0, len(cs))
	for _, c := range cs {
		if c.Alive {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Candidate) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}
