package replica

import (
	"slices"
	"time"
)

// Op is what a registration message asks of a key's home PoP.
type Op uint8

const (
	// Register adds (or refreshes) this PoP as a holder in the home's
	// directory for Config.DirTTL.
	Register Op = iota + 1
	// Unregister removes it.
	Unregister
)

// Reg is one registration message to send: Op for URL at PoP Home.
type Reg struct {
	Op   Op
	URL  string
	Home uint64
}

type holding struct {
	home uint64
	at   int64 // when it was last registered, Unix ns; 0: not registered
}

// Holdings keeps the directory true from the holder's side (seed 003 §1:
// the PoP owning a key lists who holds it): for each URL this PoP holds,
// the home it is registered at and when. A copy is registered when it is
// first held, registered again before the directory's TTL runs out,
// registered at its new home (and unregistered at the old) when Chord
// ownership moves, and unregistered when it is evicted or purged. The
// messages are returned, not sent, so the live PoP and the simulator send
// them their own way.
type Holdings struct {
	cfg Config
	m   map[string]holding
}

// NewHoldings returns an empty table.
func NewHoldings(cfg Config) *Holdings { return &Holdings{cfg: cfg, m: map[string]holding{}} }

// Hold records that url is held with home as its key's home (0: unknown,
// registered later by Due) and returns the messages that make the
// directory say so: nothing when it is registered there and not yet due,
// a Register when it is new or due, an Unregister at the old home first
// when the home moved.
func (h *Holdings) Hold(now time.Time, url string, home uint64) []Reg {
	old, ok := h.m[url]
	if home == 0 {
		if !ok {
			h.m[url] = holding{}
		}
		return nil
	}
	if ok && old.home == home && old.at != 0 && now.UnixNano()-old.at < int64(h.cfg.refreshAge()) {
		return nil
	}
	var out []Reg
	if ok && old.home != 0 && old.home != home {
		out = append(out, Reg{Op: Unregister, URL: url, Home: old.home})
	}
	h.m[url] = holding{home: home, at: now.UnixNano()}
	return append(out, Reg{Op: Register, URL: url, Home: home})
}

// Release forgets url (evicted, purged) and returns the Unregister for its
// home, if it was registered.
func (h *Holdings) Release(url string) []Reg {
	old, ok := h.m[url]
	if !ok {
		return nil
	}
	delete(h.m, url)
	if old.home == 0 {
		return nil
	}
	return []Reg{{Op: Unregister, URL: url, Home: old.home}}
}

// Held reports whether url is in the table.
func (h *Holdings) Held(url string) bool { _, ok := h.m[url]; return ok }

// Home returns the home url is registered at (0: none yet).
func (h *Holdings) Home(url string) uint64 { return h.m[url].home }

// Len returns how many URLs are held.
func (h *Holdings) Len() int { return len(h.m) }

// Due returns, sorted, the URLs whose registration is older than half the
// directory's TTL or that have none: the caller looks each key's home up
// again (ownership may have moved) and calls Hold, so a copy held for
// days stays listed and is listed where Chord now puts its key.
func (h *Holdings) Due(now time.Time) []string {
	var out []string
	for u, x := range h.m {
		if x.home == 0 || x.at == 0 || now.UnixNano()-x.at >= int64(h.cfg.refreshAge()) {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}

// At returns, sorted, the URLs registered at home: when home dies (MBPP
// declares it failed) its directory is gone, and these are registered
// again at the keys' new homes at once rather than at their next refresh.
func (h *Holdings) At(home uint64) []string {
	var out []string
	for u, x := range h.m {
		if x.home == home {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}

// Forget marks url as registered nowhere (its home died, or answered that
// the key is no longer its own): the next Due lists it, with Home 0, so the
// caller looks the home up again; no Unregister goes to the old home.
func (h *Holdings) Forget(url string) {
	if _, ok := h.m[url]; ok {
		h.m[url] = holding{}
	}
}

// refreshAge is the age at which a registration is renewed: half the
// directory's TTL, so one missed refresh (a lost message, a busy home)
// still leaves a second chance before the entry expires.
func (c Config) refreshAge() time.Duration { return c.DirTTL / 2 }

// RefreshEvery is how often a PoP runs Due: an eighth of the TTL, so a
// registration is renewed between half and five eighths of its life.
func (c Config) RefreshEvery() time.Duration { return max(c.DirTTL/8, time.Millisecond) }
