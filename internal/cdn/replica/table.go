package replica

import (
	"cmp"
	"slices"
	"time"
)

// Stats counts what a Table did.
type Stats struct {
	Stored, Evicted, Purged, Hits, Misses uint64
}

// Op is what a registration message asks of a key's home PoP.
type Op uint8

const (
	// Register adds (or refreshes) this PoP as a holder in the home's
	// directory for Config.DirTTL.
	Register Op = iota + 1
	// Unregister removes it.
	Unregister
)

// Reg is one registration message to send: Op for Key at PoP Home.
type Reg[K cmp.Ordered] struct {
	Op   Op
	Key  K
	Home uint64
}

// held is one copy a PoP holds, kept to 16 bytes (a PoP may hold
// millions): times in whole seconds since the table's epoch, rounded so
// that a copy looks younger (kept longer) and a registration older
// (renewed sooner), and the home as an index into the table's homes.
type held struct {
	since int32  // when the copy was stored (rounded up)
	regAt int32  // when it was last registered at home (rounded down)
	count int32  // requests in the current window
	home  uint16 // index+1 of the home it is registered at; 0: none yet
}

// Table is the content table of one PoP (seed 003 §3.1): the copies it
// holds, each with its requests in the current window and the home PoP it
// is registered at. Keys are whatever names a copy: the simulator uses
// URLs, a live PoP the 64-bit hash of the URL (8 bytes a key instead of
// the URL's length), whose copies live outside the Go heap (copies.go).
//
// It decides which copies are kept (Roll: fewer than MinRequests requests
// in a window, and the copy is dropped) and which are hot (pushed to every
// PoP), and it keeps the Chord directory true from the holder's side: a
// copy is registered when it is first held, registered again before the
// directory's TTL runs out (RegDue), registered at its new home (and
// unregistered at the old) when Chord ownership moves, and unregistered
// when it is dropped. The registration messages are returned, not sent, so
// the live PoP and the simulator send them their own way.
type Table[K cmp.Ordered] struct {
	cfg         Config
	m           copies[K]
	epoch       time.Time
	homes       []uint64          // held.home-1 → PoP ID
	homeIdx     map[uint64]uint16 // PoP ID → held.home
	windowStart time.Time
	stats       Stats
}

// sec is t in whole seconds since the epoch, rounded down, clamped to the
// range of held's fields (68 years either side).
func (t *Table[K]) sec(now time.Time) int32 {
	d := now.Sub(t.epoch) / time.Second
	if now.Before(t.epoch) && now.Sub(t.epoch)%time.Second != 0 {
		d-- // round towards the past
	}
	return int32(max(min(d, 1<<31-2), -(1<<31 - 2)))
}

// secUp is sec rounded up.
func (t *Table[K]) secUp(now time.Time) int32 {
	s := t.sec(now)
	if now.Sub(t.epoch)%time.Second != 0 {
		s++ // sec rounds down on either side of the epoch
	}
	return s
}

// homeOf returns home's index+1, adding it (a CDN has at most 65,535 PoPs
// in its homes' table; past that, 0: the copy is left unregistered and
// RegDue keeps offering it).
func (t *Table[K]) homeOf(home uint64) uint16 {
	if i, ok := t.homeIdx[home]; ok {
		return i
	}
	if len(t.homes) >= 1<<16-1 {
		return 0
	}
	t.homes = append(t.homes, home)
	i := uint16(len(t.homes))
	t.homeIdx[home] = i
	return i
}

// homeID is the PoP ID of a held.home.
func (t *Table[K]) homeID(i uint16) uint64 {
	if i == 0 {
		return 0
	}
	return t.homes[i-1]
}

// NewTable returns an empty table whose first window starts at now.
func NewTable[K cmp.Ordered](cfg Config, now time.Time) (*Table[K], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newCopies[K]()
	if err != nil {
		return nil, err
	}
	return &Table[K]{cfg: cfg, m: m, epoch: now, homeIdx: map[uint64]uint16{}, windowStart: now}, nil
}

// Close returns the table's memory; it is unusable afterwards.
func (t *Table[K]) Close() { t.m.close() }

// Request counts one request for k and reports whether this PoP holds it.
func (t *Table[K]) Request(k K) bool {
	h, ok := t.m.get(k)
	if !ok {
		t.stats.Misses++
		return false
	}
	h.count++
	t.m.put(k, h)
	t.stats.Hits++
	return true
}

// Count adds n requests for k, which this PoP holds, to the current window:
// the live PoP's nodes count hits themselves (a lock per hit would cost the
// hit path) and hand the sums over before each Roll.
func (t *Table[K]) Count(k K, n int) {
	if h, ok := t.m.get(k); ok {
		h.count = int32(min(int64(h.count)+int64(n), 1<<30))
		t.m.put(k, h)
		t.stats.Hits += uint64(n)
	}
}

// Has reports whether this PoP holds k, without counting a request.
func (t *Table[K]) Has(k K) bool { _, ok := t.m.get(k); return ok }

// Add records a copy of k (passive replication, a push, or the shield's
// copy) and reports whether it is new; the request that caused it counts
// when counted is true. Hold registers it.
func (t *Table[K]) Add(now time.Time, k K, counted bool) bool {
	h, ok := t.m.get(k)
	if !ok {
		h = held{since: t.secUp(now)}
		t.stats.Stored++
	}
	if counted {
		h.count++
	}
	t.m.put(k, h)
	return !ok
}

// Remove drops k (purged, or evicted by the nodes) and returns the
// Unregister for its home, if it was registered; ok reports whether it was
// held.
func (t *Table[K]) Remove(k K) (regs []Reg[K], ok bool) {
	h, ok := t.m.get(k)
	if !ok {
		return nil, false
	}
	t.m.del(k)
	t.stats.Purged++
	return t.unregister(k, h), true
}

func (t *Table[K]) unregister(k K, h held) []Reg[K] {
	if h.home == 0 {
		return nil
	}
	return []Reg[K]{{Op: Unregister, Key: k, Home: t.homeID(h.home)}}
}

// Len returns the number of copies held.
func (t *Table[K]) Len() int { return t.m.len() }

// Stats returns the counters.
func (t *Table[K]) Stats() Stats { return t.stats }

// Due returns when the current window ends (Roll is due).
func (t *Table[K]) Due() time.Time { return t.windowStart.Add(t.cfg.Window) }

// Roll ends the window if it is over: it drops the copies stored before
// the window began and asked fewer than MinRequests times in it, returns
// them (sorted) with the messages that unregister them, and the hot copies
// (most asked first) to push; then it starts a new window. Before the
// window ends it does nothing.
func (t *Table[K]) Roll(now time.Time) (evicted, hot []K, regs []Reg[K]) {
	if now.Before(t.Due()) {
		return nil, nil, nil
	}
	type kc struct {
		k     K
		count int32
	}
	start := t.sec(t.windowStart)
	var hots []kc
	t.m.all(func(k K, h held) bool {
		if int(h.count) < t.cfg.MinRequests && h.since < start {
			evicted = append(evicted, k)
			return true
		}
		if t.cfg.HotTop > 0 && int(h.count) >= max(t.cfg.HotMin, 1) {
			hots = append(hots, kc{k, h.count})
		}
		h.count = 0
		t.m.put(k, h)
		return true
	})
	slices.Sort(evicted)
	for _, k := range evicted {
		h, _ := t.m.get(k)
		regs = append(regs, t.unregister(k, h)...)
		t.m.del(k)
		t.stats.Evicted++
	}
	slices.SortFunc(hots, func(a, b kc) int {
		if c := cmp.Compare(b.count, a.count); c != 0 {
			return c
		}
		return cmp.Compare(a.k, b.k)
	})
	for i := 0; i < len(hots) && i < t.cfg.HotTop; i++ {
		hot = append(hot, hots[i].k)
	}
	// A late roll starts the window at now, not at the old boundary, so
	// that a long pause does not make every later roll immediate.
	t.windowStart = now
	return evicted, hot, regs
}

// Hold records home as the home of held copy k's key (0: unknown,
// registered later by RegDue) and returns the messages that make the
// directory say so: nothing when it is registered there and not yet due,
// a Register when it is new or due, an Unregister at the old home first
// when the home moved. A key not held gets nothing.
func (t *Table[K]) Hold(now time.Time, k K, home uint64) []Reg[K] {
	h, ok := t.m.get(k)
	if !ok || home == 0 {
		return nil
	}
	old := t.homeID(h.home)
	if old == home && !t.due(h, now) {
		return nil
	}
	var out []Reg[K]
	if old != 0 && old != home {
		out = append(out, Reg[K]{Op: Unregister, Key: k, Home: old})
	}
	if h.home = t.homeOf(home); h.home == 0 {
		return out
	}
	h.regAt = t.sec(now)
	t.m.put(k, h)
	return append(out, Reg[K]{Op: Register, Key: k, Home: home})
}

// Home returns the home k is registered at (0: none yet).
func (t *Table[K]) Home(k K) uint64 { h, _ := t.m.get(k); return t.homeID(h.home) }

// due reports whether h's registration is to be renewed at now: none yet,
// or half the directory's TTL old.
func (t *Table[K]) due(h held, now time.Time) bool {
	return h.home == 0 || time.Duration(t.sec(now)-h.regAt)*time.Second >= t.cfg.refreshAge()
}

// RegDue returns, sorted, the copies whose registration is older than half
// the directory's TTL or that have none: the caller looks each key's home
// up again where it must (ownership may have moved) and calls Hold, so a
// copy held for days stays listed, and is listed where Chord now puts its
// key.
func (t *Table[K]) RegDue(now time.Time) []K {
	var out []K
	t.m.all(func(k K, h held) bool {
		if t.due(h, now) {
			out = append(out, k)
		}
		return true
	})
	slices.Sort(out)
	return out
}

// At returns, sorted, the copies registered at home: when home dies (MBPP
// declares it failed) its directory is gone, and these are registered
// again at the keys' new homes at once rather than at their next refresh.
func (t *Table[K]) At(home uint64) []K {
	i, ok := t.homeIdx[home]
	if !ok {
		return nil
	}
	var out []K
	t.m.all(func(k K, h held) bool {
		if h.home == i {
			out = append(out, k)
		}
		return true
	})
	slices.Sort(out)
	return out
}

// Forget marks k as registered nowhere (its home died, or answered that
// the key is no longer its own): the next RegDue lists it with Home 0, so
// the caller looks the home up again; no Unregister goes to the old home.
func (t *Table[K]) Forget(k K) {
	if h, ok := t.m.get(k); ok {
		h.home, h.regAt = 0, 0
		t.m.put(k, h)
	}
}

// refreshAge is the age at which a registration is renewed: half the
// directory's TTL, so one missed refresh (a lost message, a busy home)
// still leaves a second chance before the entry expires.
func (c Config) refreshAge() time.Duration { return c.DirTTL / 2 }

// RefreshEvery is how often a PoP runs RegDue: an eighth of the TTL, so a
// registration is renewed between half and five eighths of its life.
func (c Config) RefreshEvery() time.Duration { return max(c.DirTTL/8, time.Millisecond) }
