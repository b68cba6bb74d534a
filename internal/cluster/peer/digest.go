package peer

import "time"

// Start sends this node's cache digest to every peer each DigestPeriod,
// on its own goroutine, until Close; peers' digests older than three
// periods are forgotten. Nothing starts when digests are off (negative
// DigestPeriod).
func (h *Host) Start() {
	if h.cfg.DigestPeriod < 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.wg.Add(1)
	go h.run()
}

func (h *Host) run() {
	defer h.wg.Done()
	t := time.NewTicker(h.cfg.DigestPeriod)
	defer t.Stop()
	for {
		h.DigestRound()
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
	}
}

// DigestRound builds the digest of the memory cache, sends it to every
// peer and expires the peers' digests that were not renewed for three
// rounds (Summary Cache's periodic update; a node that stopped sending has
// most likely restarted with an empty cache or left). Start's loop calls it each
// period; tests call it directly.
func (h *Host) DigestRound() {
	gen := h.digGen.Add(1)
	m := h.m.Load()
	for _, d := range m.digests {
		if d.b.Load() != nil && gen-d.gen.Load() > 3 {
			d.b.Store(nil)
		}
	}
	var keys []string
	h.local.CacheKeys(func(k string) { keys = append(keys, k) })
	b := DigestOf(keys)
	h.lastDigest.Store(b)
	msg := b.appendTo([]byte{opDigest})
	for i := range m.peers {
		if !m.usable(i) {
			continue
		}
		if err := h.sendDigest(m, i, msg); err != nil {
			h.cfg.Logger.Debug("peer digest", "peer", i, "err", err)
			continue
		}
		h.digSent.Add(1)
	}
}

// DigestOf is the cache digest of keys, sized for them (NewBloom): what a
// node sends its peers each round, and what the simulator (internal/tools/sim)
// builds of each simulated node's cache in virtual time, so both answer
// CachedElsewhere with the same filter.
func DigestOf(keys []string) *Bloom {
	b := NewBloom(len(keys))
	for _, k := range keys {
		b.Add(k)
	}
	return b
}

func (h *Host) sendDigest(m *members, i int, msg []byte) error {
	for attempt := 0; ; attempt++ {
		c, reused, err := h.get(m, i)
		if err != nil {
			return err
		}
		err = c.Send(msg)
		if err == nil {
			var p []byte
			if p, err = c.Recv(); err == nil && (len(p) != 1 || p[0] != stOK) {
				err = ErrProtocol
			}
		}
		if err == nil {
			h.put(m, i, c)
			return nil
		}
		c.Close()
		if !reused || attempt > 0 {
			return err
		}
	}
}

// CachedElsewhere reports whether some peer's last digest says its memory
// holds key: cluster GDSF's question (cache.Config.CachedElsewhere). It
// allocates nothing and takes no lock, since the cache calls it on every
// hit with its own lock held.
func (h *Host) CachedElsewhere(key string) bool {
	for _, d := range h.m.Load().digests {
		if b := d.b.Load(); b != nil && b.Has(key) {
			return true
		}
	}
	return false
}

// Holders returns the usable peers whose last digest says they hold key,
// in index order (a node in cache mode asks them before its upstream).
// "Yes" is wrong with the digest's false-positive rate: the peer then
// answers ErrNotFound.
func (h *Host) Holders(key string) []int {
	m := h.m.Load()
	var out []int
	for i, d := range m.digests {
		if b := d.b.Load(); b != nil && m.usable(i) && b.Has(key) {
			out = append(out, i)
		}
	}
	return out
}
