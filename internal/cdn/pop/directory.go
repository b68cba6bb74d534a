package pop

import (
	"context"
	"fmt"
	"strings"
	"time"

	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/replica"
)

// This file keeps the Chord directory true (seed 003 §1: the PoP owning a
// key knows which PoPs hold it): a copy is registered at its key's home
// when a node stores it, registered again before the directory's TTL,
// moved when Chord ownership changes, and unregistered when the nodes
// evict it or a purge removes it. The decisions are replica.Table's (the
// holder's side) and replica.Home's (the home's); this file sends them.

// Stored is called when a node of this PoP has stored a response under key
// (a PoP key): the copy counts in the window and is registered at its home.
func (m *manager) Stored(key string) {
	now := time.Now()
	k := HashKey(key)
	m.mu.Lock()
	if m.store.Add(now, k, true) {
		m.stats.Stored.Add(1)
	}
	home := m.homes[k]
	delete(m.homes, k)
	later := m.gone[home]
	if later {
		// Chord, in repair, named a home that has left the view: a
		// registration there would be lost, and the copy listed nowhere
		// until its refresh an hour later.
		home = 0
	}
	regs := m.store.Hold(now, k, home)
	m.mu.Unlock()
	m.sendRegs(regs)
	if later {
		m.refreshLater()
	}
}

// Evicted is called when no node of this PoP holds key any more (the
// store's byte budget pushed it out): the directory forgets this holder.
func (m *manager) Evicted(key string) {
	m.mu.Lock()
	regs, removed := m.store.Remove(HashKey(key))
	m.mu.Unlock()
	if removed {
		m.stats.Evictions.Add(1)
	}
	m.sendRegs(regs)
}

// fetchedHome remembers the home a miss's lookup found, so that Stored
// registers the copy there without a second lookup; bounded, since a
// response may never be stored.
func (m *manager) fetchedHome(key string, home uint64) {
	if home == 0 {
		return
	}
	m.mu.Lock()
	if len(m.homes) >= 4096 {
		clear(m.homes)
	}
	m.homes[HashKey(key)] = home
	m.mu.Unlock()
}

// regBatch bounds the keys of one registration message (about 30 bytes of
// JSON each): well under peerwire's 1 MiB frame.
const regBatch = 8192

// sendRegs sends registration messages, batched per home and op. A
// registration at this PoP itself goes straight to its own directory.
func (m *manager) sendRegs(regs []replica.Reg[uint64]) {
	type to struct {
		home uint64
		op   replica.Op
	}
	batches := map[to][]regItem{}
	var order []to
	for _, r := range regs {
		k := to{r.Home, r.Op}
		if _, ok := batches[k]; !ok {
			order = append(order, k)
		}
		batches[k] = append(batches[k], regItem{Key: r.Key})
	}
	self := m.holderID()
	for _, k := range order {
		items := batches[k]
		if k.home == m.r.selfID() {
			m.onRegister(k.home, msg{Op: opName(k.op), Items: items, Holder: self})
			continue
		}
		for len(items) > 0 {
			n := min(len(items), regBatch)
			m.r.send(k.home, "", msg{Op: opName(k.op), Items: items[:n], Holder: self})
			m.stats.Registrations.Add(uint64(n))
			items = items[n:]
		}
	}
}

func opName(op replica.Op) string {
	if op == replica.Register {
		return opRegister
	}
	return opUnregister
}

// onRegister is a holder's (un)registration at this PoP, taken by
// replica.Home's rules (the simulator's too). A key this PoP
// is not the home of is answered notmine, so the holder looks its home up
// again (ownership moved since it registered).
func (m *manager) onRegister(from uint64, in msg) {
	if id, _, ok := parseHolder(in.Holder); !ok || id != from {
		return // a PoP registers only itself
	}
	now := time.Now()
	var notMine []regItem
	m.mu.Lock()
	op := replica.Register
	if in.Op == opUnregister {
		op = replica.Unregister
	}
	for _, it := range in.Items {
		key := chord.ID(it.Key)
		if !m.dir.Apply(now, op, key, in.Holder, from == m.r.selfID(), op == replica.Register && m.r.owns(key)) {
			notMine = append(notMine, it)
		}
	}
	m.mu.Unlock()
	if len(notMine) > 0 {
		if from == m.r.selfID() {
			m.onNotMine(notMine)
			return
		}
		m.r.send(from, "", msg{Op: opNotMine, Items: notMine})
	}
}

// notMineWait is how long a PoP waits before it looks homes up again when
// a home answered notmine or a lookup found a home that has left the
// view: Chord is in repair (a PoP died, joined or a partition healed), and
// until the home's predecessor and the others' successors are right the
// lookup finds the same home again. Answered at once, that loop ran a
// thousand messages in ten milliseconds after a PoP was killed; a second
// is a few stabilise and check-predecessor periods.
const notMineWait = time.Second

// onNotMine: the home these keys were registered at no longer owns them;
// they are registered again at the homes a lookup finds after notMineWait.
func (m *manager) onNotMine(items []regItem) {
	m.mu.Lock()
	for _, it := range items {
		m.store.Forget(it.Key)
	}
	m.mu.Unlock()
	m.refreshLater()
}

// refreshLater runs refresh after notMineWait, once however often it is
// asked meanwhile.
func (m *manager) refreshLater() {
	if m.refreshDue.CompareAndSwap(false, true) {
		time.AfterFunc(notMineWait, func() {
			m.refreshDue.Store(false)
			m.refresh(context.Background(), time.Now())
		})
	}
}

// refresh registers again every copy whose registration is due
// (replica.Table.RegDue: half the TTL, or none yet), at the home it was
// registered at while that home still answers for the key, else where a
// Chord lookup puts it.
func (m *manager) refresh(ctx context.Context, now time.Time) {
	m.mu.Lock()
	due := m.store.RegDue(now)
	m.mu.Unlock()
	if len(due) == 0 {
		return
	}
	alive := map[uint64]bool{}
	for _, v := range m.r.view(now) {
		alive[uint64(v.ID)] = v.Alive
	}
	var regs []replica.Reg[uint64]
	retry := false
	for _, k := range due {
		m.mu.Lock()
		home := m.store.Home(k)
		m.mu.Unlock()
		if home == 0 || !alive[home] {
			owner, err := m.r.lookup(ctx, chord.ID(k))
			if err != nil || !alive[uint64(owner.ID)] {
				retry = true
				continue // Chord is in repair: look again soon
			}
			home = uint64(owner.ID)
		}
		m.mu.Lock()
		regs = append(regs, m.store.Hold(now, k, home)...)
		m.mu.Unlock()
	}
	m.sendRegs(regs)
	if retry {
		m.refreshLater()
	}
}

// homeDied: a PoP left the view (it died, or a partition cut it off). The
// keys registered there are registered at their new homes now rather than
// at their next refresh, and this PoP's directory stops listing it as a
// holder: its copies cannot be fetched, and it registers them again when
// it comes back (homeBack).
func (m *manager) homeDied(id uint64) {
	prefix := fmt.Sprintf("%016x|", id)
	m.mu.Lock()
	m.dir.Lost(func(h string) bool { return strings.HasPrefix(h, prefix) })
	m.mu.Unlock()
	m.reregister(id)
}

// homeBack: a PoP came back to the view (a partition healed, or it
// restarted). Its directory dropped this PoP's entries when it lost sight
// of this one (or lost them with its process), so the keys registered there
// are registered again now, where a lookup puts them.
func (m *manager) homeBack(id uint64) { m.reregister(id) }

// reregister forgets which keys this PoP registered at home id and, if
// there were any, registers them again where a lookup now puts them.
func (m *manager) reregister(id uint64) {
	m.mu.Lock()
	keys := m.store.At(id)
	for _, k := range keys {
		m.store.Forget(k)
	}
	m.mu.Unlock()
	if len(keys) > 0 {
		go m.refresh(context.Background(), time.Now())
	}
}

// handOver gives a new predecessor the directory entries of the keys it
// now owns (Chord §4.4: a joining node takes its keys from its successor),
// so that lookups reaching it find their holders at once.
func (m *manager) handOver(now time.Time) {
	pred, ok := m.r.predecessor()
	m.mu.Lock()
	changed := ok && pred.ID != m.pred.ID
	if changed {
		m.pred = pred
	}
	var es []chord.Entry
	moved := 0
	if changed && pred.ID != chord.ID(m.r.selfID()) {
		es = m.dir.Take(now, func(k chord.ID) bool { return !m.r.owns(k) })
		// This PoP's own copies of those keys were listed from its
		// table, not its directory: register them at the new home.
		for _, k := range m.store.At(m.r.selfID()) {
			if !m.r.owns(chord.ID(k)) {
				m.store.Forget(k)
				moved++
			}
		}
	}
	m.mu.Unlock()
	m.sendEntries(pred, es, 8)
	m.tellHolders(es)
	if moved > 0 {
		go m.refresh(context.Background(), now)
	}
}

// tellHolders answers notmine to the holders of entries handed over, on
// the new owner's behalf: their tables still name this PoP as the key's
// home, so a new owner that later loses and recalls a holder (homeDied,
// then opReregister on its return) would get none of these keys back from
// it, as a holder registers again only what it registered at the asker.
// Told now, each holder looks the home up and registers there.
func (m *manager) tellHolders(es []chord.Entry) {
	by := map[uint64][]regItem{}
	self := m.r.selfID()
	for _, e := range es {
		if id, _, ok := parseHolder(e.Holder); ok && id != self {
			by[id] = append(by[id], regItem{Key: uint64(e.Key)})
		}
	}
	for id, items := range by {
		for len(items) > 0 {
			n := min(len(items), regBatch)
			m.r.send(id, "", msg{Op: opNotMine, Items: items[:n]})
			items = items[n:]
		}
	}
}

func (m *manager) sendEntries(to chord.Peer, es []chord.Entry, hops int) {
	for len(es) > 0 {
		n := min(len(es), maxBatch/128)
		m.r.send(uint64(to.ID), to.Addr, msg{Op: opHandOver, Entries: es[:n], Hops: hops})
		m.stats.HandedOver.Add(uint64(n))
		es = es[n:]
	}
}

// onHandOver keeps the entries this PoP owns and passes the rest on to its
// own predecessor (several PoPs may have joined at once), a bounded number
// of times.
func (m *manager) onHandOver(in msg) {
	now := time.Now()
	var keep, pass []chord.Entry
	for _, e := range in.Entries {
		if m.r.owns(e.Key) {
			keep = append(keep, e)
		} else {
			pass = append(pass, e)
		}
	}
	m.mu.Lock()
	m.dir.Adopt(now, keep)
	m.mu.Unlock()
	if pred, ok := m.r.predecessor(); ok && len(pass) > 0 && in.Hops > 1 {
		m.sendEntries(pred, pass, in.Hops-1)
	}
}

// roll ends the replication window: the nodes' hit counts join the
// window's requests, the copies asked fewer than M times are dropped from
// the nodes and the directory, and the hot ones are announced to every
// live PoP (seed 003 §3.1).
func (m *manager) roll(now time.Time) {
	hits := m.cache.TakeHits()
	m.mu.Lock()
	for k, n := range hits {
		m.store.Count(k, n)
	}
	evicted, hot, regs := m.store.Roll(now)
	m.mu.Unlock()
	if len(evicted) > 0 {
		m.cache.Drop(evicted)
		m.stats.Evictions.Add(uint64(len(evicted)))
	}
	m.sendRegs(regs)
	if len(hot) == 0 {
		return
	}
	names := m.cache.Names(hot)
	self := m.holderID()
	for _, v := range m.r.view(now) {
		if v.Self || !v.Alive {
			continue
		}
		for _, k := range hot {
			if u := names[k]; u != "" {
				m.stats.PushesSent.Add(1)
				m.r.send(uint64(v.ID), v.Addr, msg{Op: opPush, URL: u, Holder: self})
			}
		}
	}
}
