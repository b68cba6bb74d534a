package pop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/replica"
)

// cutter partitions in-process PoPs: their peer links (links.setCut) and
// the HTTP between their gateways (cutRT on each miss chain), as a network
// partition or a dead PoP would. A PoP on no side reaches every side.
type cutter struct {
	mu   sync.Mutex
	side map[string]int // gateway host → side (0: none)
	dead map[string]bool
}

func (c *cutter) blocked(from, to string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead[to] || c.side[from] != 0 && c.side[to] != 0 && c.side[from] != c.side[to]
}

// cutRT is a PoP's transport to other PoPs' gateways through the cutter:
// a blocked gateway fails as an unreachable one does.
type cutRT struct {
	rt   http.RoundTripper
	from string
	c    *cutter
}

func (r cutRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.c.blocked(r.from, req.URL.Host) {
		return nil, errors.New("partitioned: no route to host")
	}
	return r.rt.RoundTrip(req)
}

func gwHost(p *PoP) string { return strings.TrimPrefix(gateway(p), "http://") }

// partition cuts the PoPs into sides (a PoP in no side is cut from none);
// no sides heals every cut.
func (c *cutter) partition(all []*PoP, sides ...[]*PoP) {
	c.mu.Lock()
	c.side = map[string]int{}
	of := map[uint64]int{}
	for i, s := range sides {
		for _, p := range s {
			c.side[gwHost(p)], of[p.ID] = i+1, i+1
		}
	}
	c.mu.Unlock()
	for _, p := range all {
		var cut []uint64
		for _, q := range all {
			if of[p.ID] != 0 && of[q.ID] != 0 && of[p.ID] != of[q.ID] {
				cut = append(cut, q.ID)
			}
		}
		p.links.setCut(cut...)
	}
}

// kill stops p as a crash would: no Chord leave, its peer links and
// listener gone, its gateway unreachable from the other PoPs.
func (c *cutter) kill(p *PoP) {
	c.mu.Lock()
	c.dead[gwHost(p)] = true
	c.mu.Unlock()
	p.cancel()
	<-p.done
	p.peerLn.Close()
	p.links.close()
}

// clients GET keys at random from the PoPs given, each as fast as it is
// answered, and count what failed and the slowest answer.
type clients struct {
	mu      sync.Mutex
	pops    []*PoP
	n, fail int
	errs    []string
	slowest time.Duration
	stop    chan struct{}
	wg      sync.WaitGroup
}

func (cl *clients) start(keys []string) {
	cl.stop = make(chan struct{})
	for _, p := range cl.pops {
		cl.wg.Add(1)
		go func() {
			defer cl.wg.Done()
			c := &http.Client{Timeout: time.Minute}
			for {
				select {
				case <-cl.stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				k := keys[rand.IntN(len(keys))]
				t0 := time.Now()
				r, err := c.Get(gateway(p) + k)
				d := time.Since(t0)
				ok := false
				if err == nil {
					b, _ := io.ReadAll(r.Body)
					r.Body.Close()
					ok = r.StatusCode == 200 && string(b) == "body of "+k
					if !ok {
						err = fmt.Errorf("%s %q", r.Status, b)
					}
				}
				cl.mu.Lock()
				cl.n++
				cl.slowest = max(cl.slowest, d)
				if !ok {
					cl.fail++
					cl.errs = append(cl.errs, fmt.Sprintf("%s %s: %v", p.cfg.Name, k, err))
				}
				cl.mu.Unlock()
			}
		}()
	}
}

func (cl *clients) halt() { close(cl.stop); cl.wg.Wait() }

// within waits up to limit for cond and returns how long it took.
func within(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	last := ""
	for !cond() {
		if lastDiff != last && testing.Verbose() {
			t.Logf("%v: %s", time.Since(start).Round(time.Millisecond), lastDiff)
			last = lastDiff
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: not after %v (%s)", what, limit, lastDiff)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// viewIs reports whether each PoP's MBPP ring is exactly its side.
func viewIs(sides ...[]*PoP) bool {
	for _, s := range sides {
		want := map[string]bool{}
		for _, p := range s {
			want[p.cfg.Name] = true
		}
		for _, p := range s {
			v := p.Pops()
			if !v.Joined || v.Members != len(s) {
				return false
			}
			for _, e := range v.Peers {
				if e.Alive != want[e.Name] {
					return false
				}
			}
		}
	}
	return true
}

// chordIs reports whether each side's PoPs own exactly the keys their side
// gives them (the first ID at or after a key) for every key asked.
func chordIs(keys []chord.ID, sides ...[]*PoP) bool {
	for _, s := range sides {
		var ids []uint64
		for _, p := range s {
			ids = append(ids, p.ID)
		}
		slices.Sort(ids)
		for _, k := range keys {
			i, _ := slices.BinarySearch(ids, uint64(k))
			owner := ids[i%len(ids)]
			for _, p := range s {
				p.mu.Lock()
				owns := p.ch != nil && p.ch.Owns(k)
				p.mu.Unlock()
				if owns != (p.ID == owner) {
					return false
				}
			}
		}
	}
	return true
}

// dirTrue reports whether, for every key, the key's home (among live)
// lists exactly the live PoPs that hold it (itself included); when not, lastDiff says
// where it differs.
func dirTrue(live []*PoP, keys []string) bool {
	lastDiff = dirDiff(live, keys)
	return lastDiff == ""
}

var lastDiff string

func dirDiff(live []*PoP, keys []string) string {
	for _, k := range keys {
		ck := chord.ID(HashKey(Key("127.0.0.1", k)))
		var home *PoP
		for _, p := range live {
			p.mu.Lock()
			if p.ch != nil && p.ch.Owns(ck) {
				home = p
			}
			p.mu.Unlock()
		}
		if home == nil {
			return k + ": no home"
		}
		var want, got []string
		for _, p := range live {
			if holds(p, k) {
				want = append(want, p.cm.m.holderID())
			}
		}
		home.cm.m.mu.Lock()
		got = home.cm.m.dir.List(time.Now(), ck, home.cm.m.holderID(), home.cm.m.store.Has(uint64(ck)))
		home.cm.m.mu.Unlock()
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			return fmt.Sprintf("%s at home %s: lists %v, want %v", k, home.cfg.Name, got, want)
		}
	}
	return ""
}

// TestFailureAndHealing: five live PoPs serve clients while one is killed
// and the four left are then cut two from two and healed. Throughout, no
// client request fails (every miss falls through the chain to the origin
// at worst). After the kill and after the heal the MBPP views, the Chord
// ring and the content directory converge to the PoPs alive; a purge
// issued on one side of the partition is confirmed there only, and reaches
// the other side when the partition heals.
func TestFailureAndHealing(t *testing.T) {
	pops, _ := cacheRing(t, 5, func(c *Config) {
		c.MBPP.HealEvery = 200 * time.Millisecond
	})
	cut := &cutter{side: map[string]int{}, dead: map[string]bool{}}
	for _, p := range pops {
		p.cm.chain.rt = cutRT{rt: p.cm.chain.rt, from: gwHost(p), c: cut}
	}
	var keys []string
	var cks []chord.ID
	for i := range 12 {
		k := fmt.Sprintf("/k%d", i)
		keys = append(keys, k)
		cks = append(cks, chord.ID(HashKey(Key("127.0.0.1", k))))
		gwGet(t, pops[i%5], k)
		gwGet(t, pops[(i+2)%5], k)
	}
	live := pops[:4]
	cl := &clients{pops: live}
	// The clients leave /k1 alone: whether a copy of it made before the
	// purge is gone must not depend on a client having fetched a new one.
	cl.start(slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == "/k1" }))
	defer func() {
		if cl.stop != nil {
			select {
			case <-cl.stop:
			default:
				cl.halt()
			}
		}
	}()

	cut.kill(pops[4])
	d := within(t, "views and Chord without the killed PoP", time.Minute, func() bool {
		return viewIs(live) && chordIs(cks, live)
	})
	t.Logf("kill: views and Chord converged %v after the kill", d)
	// The directory follows the views within a few of the content
	// manager's one-second watches: 20 s is generous, and well under the
	// hour a registration lost to a dead home would wait for its refresh.
	d = within(t, "directory without the killed PoP", 20*time.Second, func() bool { return dirTrue(live, keys) })
	t.Logf("kill: directory true %v later", d)

	a, b := live[:2], live[2:]
	gwGet(t, b[0], "/k1") // side b holds /k1 (made before the purge)
	within(t, "b holds /k1", 10*time.Second, func() bool { return holds(b[0], "/k1") })
	cut.partition(live, a, b)
	d = within(t, "two rings during the partition", time.Minute, func() bool {
		return viewIs(a, b) && chordIs(cks, a, b)
	})
	t.Logf("partition: two rings %v after the cut", d)
	res, err := a[0].cm.m.issuePurge(context.Background(), parsePurgeQuery(t, "url=/k1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Confirmed) != 2 || len(res.Missing) != 0 {
		t.Fatalf("purge during the partition: %+v (want a's two PoPs confirmed, b not asked: not in a's view)", res)
	}
	applied := func(p *PoP) bool {
		p.cm.m.mu.Lock()
		defer p.cm.m.mu.Unlock()
		return p.cm.m.purges.Vector()[res.Purge.Issuer] >= res.Purge.Seq
	}
	time.Sleep(time.Second)
	if applied(b[0]) || applied(b[1]) || !holds(b[0], "/k1") {
		t.Fatal("the purge crossed the partition: the test proves nothing")
	}

	cut.partition(live)
	d = within(t, "one ring after the heal", time.Minute, func() bool { return viewIs(live) && chordIs(cks, live) })
	t.Logf("heal: one MBPP view and one Chord ring %v after the heal", d)
	// Under syncEvery, so that it is the sync on the PoPs' return that
	// carries the purge, not the periodic anti-entropy.
	d = within(t, "the purge reaches the other side", syncEvery/3, func() bool { return applied(b[0]) && applied(b[1]) })
	t.Logf("heal: the purge reached the other side %v later", d)
	if holds(b[0], "/k1") {
		t.Fatal("b still holds the copy of /k1 made before the purge")
	}
	d = within(t, "directory after the heal", 20*time.Second, func() bool { return dirTrue(live, keys) })
	t.Logf("heal: directory true %v later", d)

	cl.halt()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	t.Logf("clients: %d requests, %d failed, slowest %v", cl.n, cl.fail, cl.slowest)
	if cl.fail > 0 || cl.n == 0 {
		t.Fatalf("%d of %d client requests failed: %v", cl.fail, cl.n, cl.errs[:min(len(cl.errs), 5)])
	}
}

// TestHomeForgetsAndRecallsHolder: a home whose view loses a holder stops
// listing it (its copies cannot be fetched), and when the holder comes
// back asks it to register again — which the holder does though its own
// view never lost the home (a PoP declared dead by the others, not by
// itself), so nothing else would make it register before its refresh.
func TestHomeForgetsAndRecallsHolder(t *testing.T) {
	fn, ps, _ := fakeRing(t, 3, replica.DefaultConfig())
	key := "s/h"
	home, a, _ := roles(t, ps, key)
	a.get(key)
	eventually(t, "a listed", func() bool { return slices.Contains(holders(home, key), a.id) })
	alive := map[uint64]bool{}
	home.m.watchView(time.Now(), alive)
	fn.mu.Lock()
	fn.down[a.id] = true
	fn.mu.Unlock()
	home.m.watchView(time.Now(), alive)
	if slices.Contains(holders(home, key), a.id) {
		t.Fatal("the home still lists a holder that left its view")
	}
	fn.mu.Lock()
	fn.down[a.id] = false
	fn.mu.Unlock()
	home.m.watchView(time.Now(), alive)
	eventually(t, "a listed again", func() bool { return slices.Contains(holders(home, key), a.id) })
}
