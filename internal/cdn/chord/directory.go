package chord

import (
	"slices"
	"strings"
	"time"
)

// Directory is what the PoP owning a key keeps about it: which PoPs hold
// the content (seed 003 §1: the owner locates, it need not store). Entries
// expire after their TTL unless refreshed; the number of keys and of holders
// per key is bounded so that a flood of announcements cannot grow it.
//
// A home may list millions of keys, most with one or two holders, so an
// entry is kept small: the holder's name is interned (a CDN has few PoPs)
// and the first holder of a key is stored inline, with no allocation of
// its own, its expiry in whole seconds: about 40 bytes a key.
type Directory struct {
	maxKeys, maxHolders int
	keys                map[ID]holders
	names               []string          // interned holder names; ref-1 indexes it
	ref                 map[string]uint32 // name → index+1
	epoch               time.Time         // expiries count seconds from here
	started             bool
}

// holding is one holder of a key until exp (seconds since the
// directory's epoch, rounded up); who 0 is none.
type holding struct {
	who uint32
	exp int32
}

// holders are a key's holders: the first inline, the rest in more.
type holders struct {
	first holding
	more  *[]holding
}

// sec is now in seconds since the epoch, rounded up (an entry lives at
// most a second longer than its TTL).
func (d *Directory) sec(now time.Time) int32 {
	if !d.started {
		d.epoch, d.started = now, true
	}
	x := now.Sub(d.epoch)
	s := x / time.Second
	if x%time.Second > 0 {
		s++
	}
	return int32(max(min(s, 1<<31-2), -(1<<31 - 2)))
}

func (h *holders) each(f func(*holding) bool) {
	if h.first.who != 0 && !f(&h.first) {
		return
	}
	if h.more == nil {
		return
	}
	for i := range *h.more {
		if !f(&(*h.more)[i]) {
			return
		}
	}
}

func (h *holders) count() int {
	n := 0
	if h.more != nil {
		n = len(*h.more)
	}
	if h.first.who != 0 {
		n++
	}
	return n
}

// drop removes the holding f selects.
func (h *holders) drop(f func(holding) bool) {
	var more []holding
	if h.more != nil {
		more = slices.DeleteFunc(*h.more, f)
	}
	if h.first.who != 0 && f(h.first) {
		h.first = holding{}
	}
	if h.first.who == 0 && len(more) > 0 {
		h.first, more = more[0], more[1:]
	}
	if len(more) == 0 {
		h.more = nil
	} else {
		h.more = &more
	}
}

// NewDirectory returns a directory of at most maxKeys keys with at most
// maxHolders holders each.
func NewDirectory(maxKeys, maxHolders int) *Directory {
	return &Directory{maxKeys: max(maxKeys, 1), maxHolders: max(maxHolders, 1), keys: map[ID]holders{}, ref: map[string]uint32{}}
}

func (d *Directory) intern(name string) uint32 {
	if r, ok := d.ref[name]; ok {
		return r
	}
	d.names = append(d.names, name)
	r := uint32(len(d.names))
	d.ref[name] = r
	return r
}

// Add records that holder has key's content until now+ttl. When full, the
// entry closest to expiry (of the key, or the key whose newest entry expires
// first) makes room.
func (d *Directory) Add(now time.Time, key ID, holder string, ttl time.Duration) {
	hs, ok := d.keys[key]
	if !ok && len(d.keys) >= d.maxKeys {
		d.Expire(now)
		if len(d.keys) >= d.maxKeys {
			d.evictKey()
		}
	}
	who, exp := d.intern(holder), d.sec(now.Add(ttl))
	found := false
	hs.each(func(h *holding) bool {
		if h.who == who {
			h.exp, found = exp, true
			return false
		}
		return true
	})
	if !found {
		if hs.count() >= d.maxHolders {
			soonest := holding{exp: 1<<31 - 1}
			hs.each(func(h *holding) bool {
				if h.exp < soonest.exp {
					soonest = *h
				}
				return true
			})
			hs.drop(func(h holding) bool { return h == soonest })
		}
		if hs.first.who == 0 {
			hs.first = holding{who: who, exp: exp}
		} else {
			var more []holding
			if hs.more != nil {
				more = *hs.more
			}
			more = append(more, holding{who: who, exp: exp})
			hs.more = &more
		}
	}
	d.keys[key] = hs
}

// evictKey drops the key whose newest entry expires first.
func (d *Directory) evictKey() {
	var victim ID
	soonest := int32(1<<31 - 1)
	for k, hs := range d.keys {
		latest := int32(-1 << 31)
		hs.each(func(h *holding) bool { latest = max(latest, h.exp); return true })
		if latest < soonest {
			victim, soonest = k, latest
		}
	}
	delete(d.keys, victim)
}

// Remove forgets that holder has key (it evicted the content).
func (d *Directory) Remove(key ID, holder string) {
	who, ok := d.ref[holder]
	hs, has := d.keys[key]
	if !ok || !has {
		return
	}
	hs.drop(func(h holding) bool { return h.who == who })
	if hs.count() == 0 {
		delete(d.keys, key)
		return
	}
	d.keys[key] = hs
}

// Holders returns the unexpired holders of key, sorted.
func (d *Directory) Holders(now time.Time, key ID) []string {
	hs := d.keys[key]
	var out []string
	t := d.nowSec(now)
	hs.each(func(h *holding) bool {
		if t < h.exp {
			out = append(out, d.names[h.who-1])
		}
		return true
	})
	slices.Sort(out)
	return out
}

// DropHolder forgets every entry of the holders gone selects, and returns
// how many went: when a PoP leaves the view (it died, or a partition cut it
// off) its copies cannot be fetched, and a directory that kept listing it
// for the rest of the TTL would not say who holds what. The holder
// registers again when it comes back.
func (d *Directory) DropHolder(gone func(holder string) bool) int {
	refs := map[uint32]bool{}
	for i, name := range d.names {
		if gone(name) {
			refs[uint32(i+1)] = true
		}
	}
	if len(refs) == 0 {
		return 0
	}
	n := 0
	for k, hs := range d.keys {
		before := hs.count()
		hs.drop(func(h holding) bool { return refs[h.who] })
		n += before - hs.count()
		if hs.count() == 0 {
			delete(d.keys, k)
		} else {
			d.keys[k] = hs
		}
	}
	return n
}

// Expire drops every expired entry.
func (d *Directory) Expire(now time.Time) {
	t := d.nowSec(now)
	for k, hs := range d.keys {
		hs.drop(func(h holding) bool { return t >= h.exp })
		if hs.count() == 0 {
			delete(d.keys, k)
		} else {
			d.keys[k] = hs
		}
	}
}

// nowSec is now in the epoch's seconds, rounded down, for comparing with
// expiries: an entry is live while nowSec < exp.
func (d *Directory) nowSec(now time.Time) int32 {
	if !d.started {
		d.epoch, d.started = now, true
	}
	x := now.Sub(d.epoch)
	s := x / time.Second
	if x%time.Second < 0 {
		s--
	}
	return int32(max(min(s, 1<<31-2), -(1<<31 - 2)))
}

// Len returns the number of keys.
func (d *Directory) Len() int { return len(d.keys) }

// Entry is one holder of one key and when the registration expires: the
// unit a home hands to the PoP that takes its keys over.
type Entry struct {
	Key     ID        `json:"key"`
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
}

// Take removes and returns, sorted, the unexpired entries of the keys move
// accepts: when a PoP joins between this one and its predecessor, the keys
// it now owns leave with their holders (seed 003 §1 keeps the directory at
// the key's owner), so lookups that reach the new owner find them at once
// rather than after every holder's next refresh.
func (d *Directory) Take(now time.Time, move func(ID) bool) []Entry {
	var out []Entry
	t := d.nowSec(now)
	for k, hs := range d.keys {
		if !move(k) {
			continue
		}
		hs.each(func(h *holding) bool {
			if t < h.exp {
				out = append(out, Entry{Key: k, Holder: d.names[h.who-1], Expires: d.epoch.Add(time.Duration(h.exp) * time.Second).UTC()})
			}
			return true
		})
		delete(d.keys, k)
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if a.Key != b.Key {
			if a.Key < b.Key {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Holder, b.Holder)
	})
	return out
}

// Put adds entries handed over by another home, each keeping its expiry;
// expired ones are dropped.
func (d *Directory) Put(now time.Time, es []Entry) {
	for _, e := range es {
		if now.Before(e.Expires) {
			d.Add(now, e.Key, e.Holder, e.Expires.Sub(now))
		}
	}
}
