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
type Directory struct {
	maxKeys, maxHolders int
	keys                map[ID]map[string]time.Time // holder → expiry
}

// NewDirectory returns a directory of at most maxKeys keys with at most
// maxHolders holders each.
func NewDirectory(maxKeys, maxHolders int) *Directory {
	return &Directory{maxKeys: max(maxKeys, 1), maxHolders: max(maxHolders, 1), keys: map[ID]map[string]time.Time{}}
}

// Add records that holder has key's content until now+ttl. When full, the
// entry closest to expiry (of the key, or the key whose newest entry expires
// first) makes room.
func (d *Directory) Add(now time.Time, key ID, holder string, ttl time.Duration) {
	hs := d.keys[key]
	if hs == nil {
		if len(d.keys) >= d.maxKeys {
			d.Expire(now)
		}
		if len(d.keys) >= d.maxKeys {
			var victim ID
			var soonest time.Time
			for k, hs := range d.keys {
				if t := latest(hs); soonest.IsZero() || t.Before(soonest) {
					victim, soonest = k, t
				}
			}
			delete(d.keys, victim)
		}
		hs = map[string]time.Time{}
		d.keys[key] = hs
	}
	if _, ok := hs[holder]; !ok && len(hs) >= d.maxHolders {
		var victim string
		var soonest time.Time
		for h, t := range hs {
			if soonest.IsZero() || t.Before(soonest) {
				victim, soonest = h, t
			}
		}
		delete(hs, victim)
	}
	hs[holder] = now.Add(ttl)
}

func latest(hs map[string]time.Time) time.Time {
	var t time.Time
	for _, e := range hs {
		if e.After(t) {
			t = e
		}
	}
	return t
}

// Remove forgets that holder has key (it evicted the content).
func (d *Directory) Remove(key ID, holder string) {
	if hs := d.keys[key]; hs != nil {
		delete(hs, holder)
		if len(hs) == 0 {
			delete(d.keys, key)
		}
	}
}

// Holders returns the unexpired holders of key, sorted.
func (d *Directory) Holders(now time.Time, key ID) []string {
	var out []string
	for h, t := range d.keys[key] {
		if now.Before(t) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// Expire drops every expired entry.
func (d *Directory) Expire(now time.Time) {
	for k, hs := range d.keys {
		for h, t := range hs {
			if !now.Before(t) {
				delete(hs, h)
			}
		}
		if len(hs) == 0 {
			delete(d.keys, k)
		}
	}
}

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
	for k, hs := range d.keys {
		if !move(k) {
			continue
		}
		for h, t := range hs {
			if now.Before(t) {
				out = append(out, Entry{Key: k, Holder: h, Expires: t})
			}
		}
		delete(d.keys, k)
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if a.Key != b.Key {
			return cmpID(a.Key, b.Key)
		}
		return strings.Compare(a.Holder, b.Holder)
	})
	return out
}

func cmpID(a, b ID) int {
	if a < b {
		return -1
	}
	return 1
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

// Len returns the number of keys.
func (d *Directory) Len() int { return len(d.keys) }
