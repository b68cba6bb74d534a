package mbpp

import (
	"fmt"
	"testing"
	"time"

	"shoal/internal/base/timeq"
)

// vnet is an in-memory network with a virtual clock: every message is
// encoded, delayed and decoded, so the wire format is exercised and bytes can
// be counted.
type vnet struct {
	t     testing.TB
	now   time.Time
	nodes map[ID]*Node
	addrs map[string]ID
	down  map[ID]bool
	cut   map[ID]bool // partitioned: messages to and from it are lost
	delay func(a, b ID) time.Duration
	q     timeq.Queue[ev]
	// hook sees every message before it is sent; it returns how many
	// copies to deliver (0 drops it, 2 duplicates it) and, for a
	// "swallowed" token, whether to fake the receiver's ack.
	hook func(m Msg) (copies int, fakeAck bool)
	// jitter, when set, adds to the RTT sample of each delivery.
	jitter func() time.Duration

	msgs, bytes map[Kind]int
}

type ev struct {
	to   ID
	from ID
	b    []byte
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testConfig(id ID) Config {
	c := DefaultConfig(id, fmt.Sprintf("pop%d", id), fmt.Sprintf("addr-%d", id))
	c.Gateway = fmt.Sprintf("gw-%d", id)
	return c
}

func newVnet(t testing.TB) *vnet {
	return &vnet{t: t, now: epoch, nodes: map[ID]*Node{}, addrs: map[string]ID{}, down: map[ID]bool{}, cut: map[ID]bool{},
		delay: func(a, b ID) time.Duration { return 5 * time.Millisecond },
		msgs:  map[Kind]int{}, bytes: map[Kind]int{}}
}

func (v *vnet) add(n *Node) {
	v.nodes[n.cfg.Self] = n
	v.addrs[n.cfg.Addr] = n.cfg.Self
}

func (v *vnet) send(from ID, ms []Msg) {
	for _, m := range ms {
		to := m.To
		if _, ok := v.nodes[to]; !ok || to == 0 {
			to = v.addrs[m.ToAddr]
		}
		if to == 0 {
			v.t.Fatalf("message %v from %d has no route (to %d %q)", m.Kind, from, m.To, m.ToAddr)
		}
		copies := 1
		fake := false
		if v.hook != nil {
			copies, fake = v.hook(m)
		}
		b := m.AppendBinary(nil)
		v.msgs[m.Kind]++
		v.bytes[m.Kind] += len(b)
		if fake {
			a := Msg{Kind: KindAck, AckOf: m.Kind, From: to, To: from, Nb: m.Nb}
			v.push(to, from, a.AppendBinary(nil))
		}
		if v.cut[from] || v.cut[to] {
			continue
		}
		for range copies {
			v.push(from, to, b)
		}
	}
}

func (v *vnet) push(from, to ID, b []byte) {
	v.q.Push(v.now.Add(v.delay(from, to)), ev{to: to, from: from, b: b})
}

// run advances the virtual clock to until, delivering messages and firing
// timers in time order.
func (v *vnet) run(until time.Time) {
	for {
		next := until
		if at, ok := v.q.Next(); ok && at.Before(next) {
			next = at
		}
		var due []*Node
		for id, n := range v.nodes {
			if v.down[id] {
				continue
			}
			if t := n.Next(); !t.IsZero() && !t.After(next) {
				if t.Before(next) {
					next, due = t, due[:0]
				}
				due = append(due, n)
			}
		}
		if next.After(until) || (next.Equal(until) && len(due) == 0 && !v.q.Due(until)) {
			v.now = until
			return
		}
		v.now = next
		if e, _, ok := v.q.PopDue(next); ok {
			n := v.nodes[e.to]
			if n == nil || v.down[e.to] {
				continue
			}
			m, err := Decode(e.b)
			if err != nil {
				v.t.Fatalf("decode: %v", err)
			}
			if m.Kind != KindJoin && m.Kind != KindWelcome && m.Kind != KindRefuse {
				s := 2 * v.delay(e.from, e.to)
				if v.jitter != nil {
					s += v.jitter()
				}
				n.SampleRTT(e.from, s)
			}
			v.send(e.to, n.Handle(v.now, m))
			continue
		}
		for _, n := range due {
			v.send(n.cfg.Self, n.Tick(v.now))
		}
	}
}

// ring builds n PoPs: a founder and n−1 joiners through it, run until every
// view holds all of them (or fails the test after limit).
func (v *vnet) ring(n int, limit time.Duration) []ID {
	ids := make([]ID, n)
	for i := range ids {
		ids[i] = ID(1000 + 7919*i) // not in ring order by creation
	}
	f, err := NewFounder(testConfig(ids[0]), v.now)
	if err != nil {
		v.t.Fatal(err)
	}
	v.add(f)
	for _, id := range ids[1:] {
		j, ms, err := NewJoiner(testConfig(id), []string{f.cfg.Addr}, nil, v.now)
		if err != nil {
			v.t.Fatal(err)
		}
		v.add(j)
		v.send(id, ms)
	}
	deadline := v.now.Add(limit)
	for !v.formed(ids) {
		if v.now.After(deadline) {
			v.dump()
			v.t.Fatalf("ring of %d not formed after %v", n, limit)
		}
		v.run(v.now.Add(100 * time.Millisecond))
	}
	return ids
}

// formed reports whether every listed PoP is a member, sees exactly the
// listed PoPs alive, and the successors make one cycle through all.
func (v *vnet) formed(ids []ID) bool {
	want := map[ID]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, id := range ids {
		n := v.nodes[id]
		if !n.Joined() || len(n.members()) != len(ids) {
			return false
		}
		for _, m := range n.members() {
			if !want[m] {
				return false
			}
		}
	}
	seen := map[ID]bool{}
	cur := ids[0]
	for range ids {
		seen[cur] = true
		cur = v.nodes[cur].Successor()
	}
	return cur == ids[0] && len(seen) == len(ids)
}

func (v *vnet) sum(f func(Stats) uint64) uint64 {
	var s uint64
	for id, n := range v.nodes {
		if !v.down[id] {
			s += f(n.Stats())
		}
	}
	return s
}

func (v *vnet) dump() {
	for id, n := range v.nodes {
		st := n.Stats()
		v.t.Logf("%d joined=%v refused=%q members=%v ping=%v/%d pong=%v/%d m=%d pending=%d stats=%+v", id, n.joined, n.refused, n.members(),
			n.havePing, n.ping, n.havePong, n.pong, n.m, len(n.pending), st)
	}
}

// aliveAt returns the first of ids (other than victim) whose view still
// has victim alive, or 0 when every one has dropped it.
func (v *vnet) aliveAt(ids []ID, victim ID) ID {
	for _, id := range ids {
		if id != victim && v.nodes[id].Alive(victim) {
			return id
		}
	}
	return 0
}
