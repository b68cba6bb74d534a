package replica

import "time"

// Source is where one step of a miss fetches from.
type Source uint8

const (
	// Remote is a PoP that holds the content (the directory lists it): it
	// answers from what it holds, or not at all (seed 003 §1: the PoP with
	// the best service score among the holders serves).
	Remote Source = iota + 1
	// Shield is the key's home PoP: it fetches from the origin when nobody
	// holds the content and keeps the copy, so that one origin fetch feeds
	// every PoP that misses next (the home of seed 003 §1 locates content;
	// making it the shield is shoal's addition, measured in docs/cdn.md).
	Shield
	// Origin is the site's own server.
	Origin
)

// String names the source as logs and counters do.
func (s Source) String() string {
	switch s {
	case Remote:
		return "remote"
	case Shield:
		return "shield"
	case Origin:
		return "origin"
	}
	return "unknown"
}

// Step is one place a miss tries, in order; PoP is the PoP's ring ID (0 for
// the origin).
type Step struct {
	Source Source
	PoP    uint64
}

// Miss is what a PoP knows when content it was asked for is not held by any
// of its nodes: who it is, the key's home PoP, the holders the home's
// directory lists, each as this PoP's view sees it, and the round-trip
// times that decide whether the shield is worth its detour.
type Miss struct {
	// Self is the PoP that missed.
	Self uint64
	// Home is the key's home PoP (its Chord owner) as this PoP's view
	// sees it; Home.ID 0 when the lookup failed.
	Home Candidate
	// Holders are the PoPs the directory lists, in any order; Self and
	// dead ones are skipped.
	Holders []Candidate
	// ForShield is set when the request is itself the shield step of
	// another PoP's miss: the home goes to the origin and nowhere else, so
	// that a miss never travels in a circle.
	ForShield bool
	// SelfOrigin, SelfHome and HomeOrigin are round-trip times; zero
	// means unknown, and an unknown detour is taken (the shield's copy is
	// worth more than a guess).
	SelfOrigin, SelfHome, HomeOrigin time.Duration
}

// Plan orders where a miss is fetched from: the live holders best score
// first (Rank; with NearerOrigin, only those nearer than the origin), then the key's home as shield (when it is another live PoP
// and the detour self→home→origin is at most ShieldStretch times the
// direct path self→origin), then the origin. The caller tries each in
// turn and stops at the first that answers; the live PoPs and the
// simulator both follow this plan.
func (c Config) Plan(m Miss) []Step {
	if m.ForShield {
		return []Step{{Source: Origin}}
	}
	var out []Step
	hs := make([]Candidate, 0, len(m.Holders))
	for _, h := range m.Holders {
		if h.ID != m.Self && !c.fartherThanOrigin(h, m) {
			hs = append(hs, h)
		}
	}
	for _, h := range Rank(hs) {
		out = append(out, Step{Source: Remote, PoP: h.ID})
	}
	if m.Home.ID != 0 && m.Home.ID != m.Self && m.Home.Alive && c.detourOK(m) {
		out = append(out, Step{Source: Shield, PoP: m.Home.ID})
	}
	return append(out, Step{Source: Origin})
}

// fartherThanOrigin reports whether NearerOrigin leaves holder h out: its
// RTT and the origin's are known and the origin is nearer.
func (c Config) fartherThanOrigin(h Candidate, m Miss) bool {
	return c.NearerOrigin && h.RTT > 0 && m.SelfOrigin > 0 && h.RTT > m.SelfOrigin
}

func (c Config) detourOK(m Miss) bool {
	if c.ShieldStretch <= 0 || m.SelfOrigin <= 0 || m.SelfHome <= 0 || m.HomeOrigin <= 0 {
		return true
	}
	return float64(m.SelfHome+m.HomeOrigin) <= c.ShieldStretch*float64(m.SelfOrigin)
}

// Better is seed 003's redirect choice: the best-scoring live holder when
// its score beats self's (self carries MBPP's local bonus, so a holder must
// be clearly better before a client is sent away); ok is false when the
// client is best served where it is.
func Better(self Candidate, holders []Candidate) (Candidate, bool) {
	for _, h := range Rank(holders) {
		if h.ID == self.ID {
			continue
		}
		return h, h.Score > self.Score
	}
	return Candidate{}, false
}
