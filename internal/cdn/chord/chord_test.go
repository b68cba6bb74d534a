package chord

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"shoal/internal/base/timeq"
	"shoal/internal/testutil"
)

// vnet is an in-memory network with a virtual clock; messages are encoded
// and decoded on the way.
type vnet struct {
	t     testing.TB
	now   time.Time
	nodes map[ID]*Node
	down  map[ID]bool
	q     timeq.Queue[ev]
	rng   *rand.Rand
	msgs  int
}

type ev struct {
	to   ID // 0: a timer of node tick
	tick ID
	b    []byte
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newVnet(t testing.TB, seed uint64) *vnet {
	return &vnet{t: t, now: epoch, nodes: map[ID]*Node{}, down: map[ID]bool{}, rng: rand.New(rand.NewPCG(seed, 1))}
}

func (v *vnet) push(at time.Time, e ev) { v.q.Push(at, e) }

func (v *vnet) send(ms []Msg) {
	for _, m := range ms {
		v.msgs++
		d := time.Duration(1+v.rng.IntN(5)) * time.Millisecond
		v.push(v.now.Add(d), ev{to: m.To.ID, b: m.AppendBinary(nil)})
	}
}

func (v *vnet) schedule(n *Node) { v.push(n.Next(), ev{tick: n.cfg.Self.ID}) }

func (v *vnet) add(n *Node, ms []Msg) {
	v.nodes[n.cfg.Self.ID] = n
	v.send(ms)
	v.schedule(n)
}

func (v *vnet) run(d time.Duration) {
	until := v.now.Add(d)
	for e, at, ok := v.q.PopDue(until); ok; e, at, ok = v.q.PopDue(until) {
		v.now = at
		if e.tick != 0 {
			n := v.nodes[e.tick]
			if n == nil || v.down[e.tick] || n.Next().After(v.now) {
				continue // stale timer: a newer one is queued
			}
			v.send(n.Tick(v.now))
			v.schedule(n)
			continue
		}
		n := v.nodes[e.to]
		if n == nil || v.down[e.to] {
			continue
		}
		m, err := Decode(e.b)
		if err != nil {
			v.t.Fatal(err)
		}
		before := n.Next()
		v.send(n.Handle(v.now, m))
		if n.Next().Before(before) {
			v.schedule(n)
		}
	}
	v.now = until
}

func cfg(id ID) Config {
	c := DefaultConfig(Peer{ID: id, Addr: fmt.Sprintf("pop-%x", id)})
	return c
}

func (v *vnet) live() []ID {
	var ids []ID
	for id := range v.nodes {
		if !v.down[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// owner is the brute-force answer: the first live ID at or after key.
func owner(ids []ID, key ID) ID {
	i, _ := slices.BinarySearch(ids, key)
	if i == len(ids) {
		return ids[0]
	}
	return ids[i]
}

// join adds a node with a random ID through a random live node.
func (v *vnet) join() ID { return v.joinAs(ID(v.rng.Uint64())) }

// rejoin restarts the joiners whose contacts all failed, as the daemon
// does with other PoPs it knows.
func (v *vnet) rejoin() {
	for _, id := range v.live() {
		if v.nodes[id].JoinFailed() {
			delete(v.nodes, id)
			v.joinAs(id)
		}
	}
}

func (v *vnet) joinAs(id ID) ID {
	live := v.live()
	if len(live) == 0 {
		n, err := Create(cfg(id), v.now)
		if err != nil {
			v.t.Fatal(err)
		}
		v.add(n, nil)
		return id
	}
	var cs []Peer
	for range 3 {
		cs = append(cs, v.nodes[live[v.rng.IntN(len(live))]].cfg.Self)
	}
	n, ms, err := Join(cfg(id), cs, v.now)
	if err != nil {
		v.t.Fatal(err)
	}
	v.add(n, ms)
	return id
}

// ringOK reports whether every live node's successor and predecessor are
// the true ones.
func (v *vnet) ringOK() error {
	ids := v.live()
	for i, id := range ids {
		n := v.nodes[id]
		want := ids[(i+1)%len(ids)]
		if got := n.Successor().ID; got != want {
			return fmt.Errorf("node %x: successor %x, want %x", id, got, want)
		}
		if len(ids) > 1 {
			p, ok := n.Predecessor()
			if wantP := ids[(i-1+len(ids))%len(ids)]; !ok || p.ID != wantP {
				return fmt.Errorf("node %x: predecessor %x (%v), want %x", id, p.ID, ok, wantP)
			}
		}
	}
	return nil
}

func (v *vnet) converge(limit time.Duration) {
	deadline := v.now.Add(limit)
	for {
		v.run(500 * time.Millisecond)
		v.rejoin()
		err := v.ringOK()
		if err == nil {
			return
		}
		if v.now.After(deadline) {
			for _, id := range v.live()[:min(len(v.live()), 12)] {
				n := v.nodes[id]
				p, ok := n.Predecessor()
				v.t.Logf("%x joined=%v failed=%v reqs=%d contacts=%v succ=%x pred=%x/%v", id, n.Joined(), n.joinFailed, len(n.reqs), n.contacts, n.Successor().ID, p.ID, ok)
			}
			v.t.Fatalf("ring not repaired after %v: %v", limit, err)
		}
	}
}

// lookups checks every key against the brute-force owner from random
// origins and returns the hop counts.
func (v *vnet) lookups(keys []ID) []int {
	ids := v.live()
	var hops []int
	for start := 0; start < len(keys); start += 256 {
		batch := keys[start:min(start+256, len(keys))]
		type q struct {
			n   *Node
			id  uint64
			key ID
		}
		var qs []q
		for _, k := range batch {
			n := v.nodes[ids[v.rng.IntN(len(ids))]]
			id, ms := n.Lookup(v.now, k)
			v.send(ms)
			qs = append(qs, q{n, id, k})
		}
		got := map[*Node]map[uint64]Result{}
		for waited := time.Duration(0); waited < 30*time.Second; waited += 100 * time.Millisecond {
			v.run(100 * time.Millisecond)
			done := 0
			for _, x := range qs {
				if got[x.n] == nil {
					got[x.n] = map[uint64]Result{}
				}
				for _, r := range x.n.TakeResults() {
					got[x.n][r.Lookup] = r
				}
			}
			for _, x := range qs {
				if _, ok := got[x.n][x.id]; ok {
					done++
				}
			}
			if done == len(qs) {
				break
			}
		}
		for _, x := range qs {
			r, ok := got[x.n][x.id]
			if !ok || r.Err != nil {
				v.t.Fatalf("lookup of %x from %x: %+v (done %v)", x.key, x.n.cfg.Self.ID, r, ok)
			}
			if want := owner(ids, x.key); r.Owner.ID != want {
				v.t.Fatalf("lookup of %x from %x: owner %x, want %x", x.key, x.n.cfg.Self.ID, r.Owner.ID, want)
			}
			hops = append(hops, r.Hops)
		}
	}
	return hops
}

func (v *vnet) keys(extra int) []ID {
	var keys []ID
	for _, id := range v.live() {
		keys = append(keys, id, id+1, id-1)
	}
	for range extra {
		keys = append(keys, ID(v.rng.Uint64()))
	}
	return keys
}

func stats(h []int) (mean float64, p99, most int) {
	s := slices.Clone(h)
	slices.Sort(s)
	sum := 0
	for _, x := range s {
		sum += x
	}
	return float64(sum) / float64(len(s)), s[(len(s)*99)/100], s[len(s)-1]
}

func TestLookupsCorrectWithinLogHops(t *testing.T) {
	sizes := []int{1, 2, 3, 8, 64, 512, 1024}
	if testing.Short() || testutil.RaceEnabled {
		sizes = sizes[:5]
	}
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			v := newVnet(t, uint64(n))
			for range n {
				v.join()
				v.run(20 * time.Millisecond)
			}
			v.converge(2 * time.Minute)
			v.run(30 * time.Second) // fix-fingers: ≈ 64 fingers × 250 ms, twice
			keys := v.keys(2000)
			hops := v.lookups(keys)
			limit := int(math.Ceil(math.Log2(float64(n)))) + 1
			mean, p99, most := stats(hops)
			if most > limit {
				t.Fatalf("a lookup took %d hops, want ≤ ⌈log₂%d⌉+1 = %d", most, n, limit)
			}
			t.Logf("N=%d: %d lookups, hops mean %.2f p99 %d max %d (limit %d)", n, len(keys), mean, p99, most, limit)
		})
	}
}

func TestCorrectAfterChurn(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			v := newVnet(t, seed)
			for range 64 {
				v.join()
				v.run(20 * time.Millisecond)
			}
			v.converge(time.Minute)
			v.run(20 * time.Second)
			// Random joins, failures and graceful leaves, faster than
			// stabilise repairs them.
			for i := range 48 {
				live := v.live()
				switch i % 3 {
				case 0:
					v.join()
				case 1:
					v.down[live[v.rng.IntN(len(live))]] = true
				case 2:
					id := live[v.rng.IntN(len(live))]
					v.send(v.nodes[id].Leave())
					v.down[id] = true
				}
				v.run(100 * time.Millisecond)
			}
			v.converge(time.Minute)
			v.run(20 * time.Second)
			hops := v.lookups(v.keys(500))
			mean, p99, most := stats(hops)
			t.Logf("%d live after churn: hops mean %.2f p99 %d max %d", len(v.live()), mean, p99, most)
		})
	}
}

func TestSuccessorListSurvivesConsecutiveFailures(t *testing.T) {
	v := newVnet(t, 9)
	for range 32 {
		v.join()
		v.run(20 * time.Millisecond)
	}
	v.converge(time.Minute)
	v.run(10 * time.Second)
	ids := v.live()
	// Fail Successors−1 = 3 consecutive nodes at once.
	for _, id := range ids[5:8] {
		v.down[id] = true
	}
	v.converge(time.Minute)
	v.lookups(v.keys(100))
}

func TestMsgRoundTrip(t *testing.T) {
	m := Msg{Kind: KindState, From: Peer{1, "a:1"}, To: Peer{2, "b:2"}, Req: 300, Key: 1 << 63, Done: true,
		Node: Peer{3, "c"}, HasPred: true, Pred: Peer{4, "d"}, Succs: []Peer{{5, "e"}, {6, "f"}}}
	b := m.AppendBinary(nil)
	got, err := Decode(b)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for i := range b {
		if _, err := Decode(b[:i]); err == nil {
			t.Fatalf("truncated at %d accepted", i)
		}
	}
}

func TestDirectory(t *testing.T) {
	d := NewDirectory(2, 2)
	d.Add(epoch, 1, "popA", time.Second)
	d.Add(epoch, 1, "popB", 2*time.Second)
	d.Add(epoch, 1, "popC", 3*time.Second) // evicts popA, closest to expiry
	if got := d.Holders(epoch, 1); !reflect.DeepEqual(got, []string{"popB", "popC"}) {
		t.Fatalf("holders %v", got)
	}
	if got := d.Holders(epoch.Add(2*time.Second), 1); !reflect.DeepEqual(got, []string{"popC"}) {
		t.Fatalf("after 2 s: %v, want popC only (TTL)", got)
	}
	d.Add(epoch, 2, "popA", 10*time.Second)
	d.Add(epoch, 3, "popA", 10*time.Second) // evicts key 1, whose newest entry expires first
	if d.Len() != 2 || d.Holders(epoch, 1) != nil {
		t.Fatalf("len %d, key 1 %v", d.Len(), d.Holders(epoch, 1))
	}
	d.Remove(2, "popA")
	d.Expire(epoch.Add(time.Minute))
	if d.Len() != 0 {
		t.Fatalf("len %d after expiry", d.Len())
	}
	if Hash("pop1") == Hash("pop2") || ContentKey("s", "/a") != Hash("s/a") {
		t.Fatal("hash")
	}
}

// TestOwnsIsTheKeysSuccessor: on a converged ring of 16, every key is owned
// by exactly one node, the first at or after it on the circle.
func TestOwnsIsTheKeysSuccessor(t *testing.T) {
	v := newVnet(t, 5)
	for range 16 {
		v.join()
		v.run(20 * time.Millisecond)
	}
	v.converge(time.Minute)
	ids := v.live()
	slices.Sort(ids)
	for _, k := range v.keys(500) {
		i, _ := slices.BinarySearch(ids, k)
		want := ids[i%len(ids)]
		var owners []ID
		for _, id := range ids {
			if v.nodes[id].Owns(k) {
				owners = append(owners, id)
			}
		}
		if len(owners) != 1 || owners[0] != want {
			t.Fatalf("key %x: owners %x, want %x", k, owners, want)
		}
	}
}

// TestDirectoryHandOver: Take removes the moved keys' live entries, and
// Put at the new home keeps each expiry.
func TestDirectoryHandOver(t *testing.T) {
	d := NewDirectory(10, 10)
	d.Add(epoch, 5, "popA", time.Minute)
	d.Add(epoch, 5, "popB", time.Second)
	d.Add(epoch, 9, "popA", time.Minute)
	now := epoch.Add(2 * time.Second) // popB's entry has expired
	got := d.Take(now, func(k ID) bool { return k < 7 })
	want := []Entry{{Key: 5, Holder: "popA", Expires: epoch.Add(time.Minute)}}
	if !reflect.DeepEqual(got, want) || d.Len() != 1 {
		t.Fatalf("take: %v (len %d), want %v", got, d.Len(), want)
	}
	n := NewDirectory(10, 10)
	n.Put(now, got)
	if h := n.Holders(epoch.Add(59*time.Second), 5); !reflect.DeepEqual(h, []string{"popA"}) {
		t.Fatalf("new home before expiry: %v", h)
	}
	if h := n.Holders(epoch.Add(time.Minute), 5); h != nil {
		t.Fatalf("new home after expiry: %v (the expiry moved with the entry)", h)
	}
}

// TestDirectoryHolders: many holders of one key, removal of the inline
// first, re-adding refreshes rather than duplicates, and the per-key bound
// evicts the holder closest to expiry.
func TestDirectoryHolders(t *testing.T) {
	d := NewDirectory(10, 3)
	for i, h := range []string{"a", "b", "c"} {
		d.Add(epoch, 1, h, time.Duration(i+1)*time.Minute)
	}
	d.Add(epoch, 1, "a", 10*time.Minute) // refresh, not a fourth
	if got := d.Holders(epoch, 1); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("holders %v", got)
	}
	d.Remove(1, "a") // the inline one
	if got := d.Holders(epoch, 1); !reflect.DeepEqual(got, []string{"b", "c"}) {
		t.Fatalf("after removing a: %v", got)
	}
	d.Add(epoch, 1, "a", 10*time.Minute)
	d.Add(epoch, 1, "d", 10*time.Minute) // full: b, expiring first (2 min), goes
	if got := d.Holders(epoch, 1); !reflect.DeepEqual(got, []string{"a", "c", "d"}) {
		t.Fatalf("bounded: %v, want b evicted (closest to expiry)", got)
	}
	d.Expire(epoch.Add(5 * time.Minute))
	if got := d.Holders(epoch, 1); !reflect.DeepEqual(got, []string{"a", "d"}) || d.Len() != 1 {
		t.Fatalf("after expiry: %v len %d", got, d.Len())
	}
}
