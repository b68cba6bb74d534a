package pop

import (
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"shoal/internal/cdn/replica"
)

// This file is purging: an operator asks one PoP (POST /purge on its
// admin API) to remove or mark stale copies by URL, prefix or surrogate
// key; that PoP applies it, sends it to every PoP alive in its view and
// answers 200 only when each confirmed, naming the ones that did not. Every
// PoP keeps the purges it applied for a retention time (replica.PurgeLog):
// a PoP that was away asks a peer for what it missed when it comes back
// (and every SyncEvery, from one PoP drawn at random), so a purge reaches
// it even though the issuer gave up waiting.

// PurgeResult is the answer of POST /purge.
type PurgeResult struct {
	Purge     replica.Purge `json:"purge"`
	Local     int           `json:"removed_here"`
	Confirmed []string      `json:"confirmed"`
	Missing   []string      `json:"missing"`
	Seconds   float64       `json:"seconds"`
}

// confirmTimeout bounds how long an issuer waits for every PoP's
// confirmation; a PoP that has not answered by then is named Missing and
// catches up by sync.
const confirmTimeout = 5 * time.Second

// applyPurge applies p here once (a purge seen again is ignored): the nodes
// remove or mark stale what it matches, and a key left with no copy leaves
// the window's table and the directory. It returns how many keys went.
func (m *manager) applyPurge(p replica.Purge) int {
	if p.Validate() != nil {
		return 0
	}
	m.mu.Lock()
	fresh := m.purges.Add(p)
	m.mu.Unlock()
	if !fresh {
		return 0
	}
	return m.carryOut(p)
}

// carryOut has the nodes apply p. The keys a hard purge removed leave the
// window's table and the directory; a soft purge's stale copies stay
// listed (a PoP asking for one refuses it by its tombstone until it is
// revalidated, and a revalidated copy is current again).
func (m *manager) carryOut(p replica.Purge) int {
	hit := m.cache.Apply(p, m.cfg.PurgeMargin)
	if !p.Soft {
		m.forget(hit)
	} else {
		m.stats.Purges.Add(1)
		m.stats.PurgedObjects.Add(uint64(len(hit)))
	}
	return len(hit)
}

// issuePurge names p as this PoP's, applies it, sends it to every PoP alive
// in the view and waits for each to confirm (at most confirmTimeout).
func (m *manager) issuePurge(ctx context.Context, p replica.Purge) (PurgeResult, error) {
	if err := p.Validate(); err != nil {
		return PurgeResult{}, err
	}
	start := time.Now()
	m.mu.Lock()
	p = m.purges.Issue(start, p)
	m.mu.Unlock()
	res := PurgeResult{Purge: p, Confirmed: []string{m.name}, Local: m.carryOut(p)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, v := range m.r.view(start) {
		if v.Self || !v.Alive {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, m.confirm)
			defer cancel()
			_, err := m.request(ctx, uint64(v.ID), v.Addr, msg{Op: opPurge, Purge: &p})
			mu.Lock()
			if err == nil {
				res.Confirmed = append(res.Confirmed, v.Name)
			} else {
				res.Missing = append(res.Missing, v.Name)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(res.Confirmed[1:])
	slices.Sort(res.Missing)
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// forget takes keys with no copy left out of the table and the directory.
func (m *manager) forget(gone []string) {
	m.mu.Lock()
	var regs []replica.Reg[uint64]
	for _, k := range gone {
		r, _ := m.store.Remove(HashKey(k))
		regs = append(regs, r...)
	}
	m.mu.Unlock()
	m.sendRegs(regs)
	m.stats.Purges.Add(1)
	m.stats.PurgedObjects.Add(uint64(len(gone)))
}

// syncPurges asks PoP id at addr (or, with id 0, one live PoP drawn at
// random) for the purges this PoP lacks; the answer is applied as it
// arrives.
func (m *manager) syncPurges(id uint64, addr string, now time.Time) {
	if id == 0 {
		var live []uint64
		addrs := map[uint64]string{}
		for _, v := range m.r.view(now) {
			if !v.Self && v.Alive {
				live = append(live, uint64(v.ID))
				addrs[uint64(v.ID)] = v.Addr
			}
		}
		if len(live) == 0 {
			return
		}
		id = live[rand.IntN(len(live))]
		addr = addrs[id]
	}
	m.mu.Lock()
	m.purges.Expire(now)
	vec := m.purges.Vector()
	m.mu.Unlock()
	m.stats.Syncs.Add(1)
	m.r.send(id, addr, msg{Op: opSync, Vector: vec})
}

// tombstone reports whether a copy of key made at made, arriving from
// another PoP, is one a purge this PoP applied removed (hard) or marked
// stale (soft): that PoP has not applied it yet.
func (m *manager) tombstone(key string, tags []string, made time.Time) (hard, soft bool) {
	host, uri := splitKey(key)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.purges.Tombstone(host, uri, tags, made)
}

// parsePurge reads POST /purge's query: url=/path, prefix=/dir/ or
// tag=KEY, optionally host=NAME (default: every site) and soft=1.
func parsePurge(r *http.Request) (replica.Purge, error) {
	q := r.URL.Query()
	p := replica.Purge{URL: q.Get("url"), Prefix: q.Get("prefix"), Tag: q.Get("tag"), Host: strings.ToLower(q.Get("host"))}
	switch q.Get("soft") {
	case "1", "true", "yes":
		p.Soft = true
	}
	return p, p.Validate()
}
