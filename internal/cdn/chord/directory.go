package chord

import (
	"slices"
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

// Len returns the number of keys.
func (d *Directory) Len() int { return len(d.keys) }
