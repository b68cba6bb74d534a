package pop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/mbpp"
	"shoal/internal/cdn/replica"
)

// fakeNet is an in-memory ring of content managers: Chord ownership is
// computed from the sorted IDs of the PoPs up, MBPP's view is every PoP
// with a fixed score, and messages are delivered by goroutine (JSON
// round-tripped, as on the wire). Each PoP's gateway is an httptest server
// in front of a fake node: a map store that answers only-if-cached from
// itself and sends misses to the PoP's chain.
type fakeNet struct {
	t    *testing.T
	mu   sync.Mutex
	pops map[uint64]*fakePoP
	down map[uint64]bool
	// cut drops messages between the two PoPs (either direction).
	cut  map[[2]uint64]bool
	sent atomic.Int64
	// rtt is every link's RTT in the views (0: unknown).
	rtt time.Duration
}

type fakePoP struct {
	net   *fakeNet
	id    uint64
	name  string
	score float64
	m     *manager
	ch    *chain
	node  *fakeNode
	gw    *httptest.Server
}

func newFakeNet(t *testing.T) *fakeNet {
	return &fakeNet{t: t, pops: map[uint64]*fakePoP{}, down: map[uint64]bool{}, cut: map[[2]uint64]bool{}}
}

// add starts PoP name with the given score in front of origin.
func (n *fakeNet) add(name string, score float64, cfg replica.Config, origin upstream) *fakePoP {
	return n.addWithID(name, uint64(chord.Hash(name)), score, cfg, origin)
}

// addWithID is add with the ring ID chosen.
func (n *fakeNet) addWithID(name string, id uint64, score float64, cfg replica.Config, origin upstream) *fakePoP {
	p := &fakePoP{net: n, id: id, name: name, score: score, node: &fakeNode{objs: map[string]*fakeObj{}, hits: map[string]int{}}}
	p.gw = httptest.NewServer(http.HandlerFunc(p.serve))
	n.t.Cleanup(p.gw.Close)
	var err error
	p.m, err = newManager(p, cfg, name, p.gw.URL, p.node, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now())
	if err != nil {
		n.t.Fatal(err)
	}
	p.ch = newChain(p.m, origin, false)
	p.m.warm = func(key string) { p.get(key) }
	n.mu.Lock()
	n.pops[p.id] = p
	n.mu.Unlock()
	return p
}

func (n *fakeNet) live() []uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	var ids []uint64
	for id := range n.pops {
		if !n.down[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (p *fakePoP) selfID() uint64 { return p.id }

func (p *fakePoP) lookup(ctx context.Context, key chord.ID) (chord.Peer, error) {
	ids := p.net.live()
	i, _ := slices.BinarySearch(ids, uint64(key))
	return chord.Peer{ID: chord.ID(ids[i%len(ids)]), Addr: "x"}, nil
}

func (p *fakePoP) owns(key chord.ID) bool {
	o, _ := p.lookup(context.Background(), key)
	return uint64(o.ID) == p.id
}

func (p *fakePoP) predecessor() (chord.Peer, bool) {
	ids := p.net.live()
	i, _ := slices.BinarySearch(ids, p.id)
	return chord.Peer{ID: chord.ID(ids[(i+len(ids)-1)%len(ids)]), Addr: "x"}, true
}

func (p *fakePoP) send(id uint64, addr string, m msg) {
	n := p.net
	n.mu.Lock()
	to := n.pops[id]
	drop := n.down[id] || n.down[p.id] || n.cut[[2]uint64{p.id, id}] || n.cut[[2]uint64{id, p.id}]
	n.mu.Unlock()
	if to == nil || drop {
		return
	}
	n.sent.Add(1)
	b, err := encodeMsg(m)
	if err != nil {
		n.t.Error(err)
		return
	}
	from := p.id
	go to.m.onCDNFrame(from, b[1:])
}

func (p *fakePoP) view(now time.Time) []mbpp.PeerView {
	n := p.net
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []mbpp.PeerView
	for id, q := range n.pops {
		out = append(out, mbpp.PeerView{ID: mbpp.ID(id), Name: q.name, Alive: !n.down[id], Score: q.score, Self: id == p.id, Addr: "x", RTT: n.rtt})
	}
	return out
}

// get asks this PoP's gateway for key (a PoP key: host + path) and returns
// the body and how it was served (HIT or MISS).
func (p *fakePoP) get(key string) (string, string) {
	host, uri := splitKey(key)
	req, _ := http.NewRequest("GET", p.gw.URL+uri, nil)
	req.Host = host
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error(), "ERROR"
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return string(b), r.Header.Get("X-Cache")
}

type fakeObj struct {
	body  string
	tags  []string
	at    time.Time
	stale bool
}

// fakeNode is a node in cache mode reduced to what the manager sees: a
// store by PoP key, hit counts, purge and drop.
type fakeNode struct {
	mu   sync.Mutex
	objs map[string]*fakeObj
	hits map[string]int
}

func (p *fakePoP) serve(w http.ResponseWriter, r *http.Request) {
	key := Key(r.Host, r.URL.RequestURI())
	nd := p.node
	nd.mu.Lock()
	o := nd.objs[key]
	if o != nil && !o.stale {
		nd.hits[key]++
	}
	nd.mu.Unlock()
	if o != nil && !o.stale {
		w.Header().Set("X-Cache", "HIT")
		w.Header().Set("Date", o.at.UTC().Format(http.TimeFormat))
		w.Header().Set("Surrogate-Key", strings.Join(o.tags, " "))
		io.WriteString(w, o.body)
		return
	}
	if strings.Contains(r.Header.Get("Cache-Control"), "only-if-cached") {
		w.WriteHeader(http.StatusGatewayTimeout)
		return
	}
	resp, err := p.ch.Fetch(r.Context(), r)
	if err != nil {
		http.Error(w, "upstream failed", http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		made := madeAt(resp.Header, time.Now())
		nd.mu.Lock()
		nd.objs[key] = &fakeObj{body: string(b), tags: replica.Tags(resp.Header.Get("Surrogate-Key")), at: made}
		nd.mu.Unlock()
		p.m.Stored(key)
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.Header().Set("X-Cache", "MISS")
	w.WriteHeader(resp.StatusCode)
	w.Write(b)
}

func (nd *fakeNode) Apply(p replica.Purge, margin time.Duration) []string {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	var gone []string
	for k, o := range nd.objs {
		host, uri := splitKey(k)
		if !o.at.Before(p.At.Add(margin)) || !p.Matches(host, uri, o.tags) {
			continue
		}
		if p.Soft {
			o.stale = true
		} else {
			delete(nd.objs, k)
		}
		gone = append(gone, k)
	}
	slices.Sort(gone)
	return gone
}

func (nd *fakeNode) Drop(keys []uint64) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for _, k := range keys {
		for key := range nd.objs {
			if HashKey(key) == k {
				delete(nd.objs, key)
			}
		}
	}
}

func (nd *fakeNode) Names(keys []uint64) map[uint64]string {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	out := map[uint64]string{}
	for key := range nd.objs {
		if slices.Contains(keys, HashKey(key)) {
			out[HashKey(key)] = key
		}
	}
	return out
}

func (nd *fakeNode) TakeHits() map[uint64]int {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	out := map[uint64]int{}
	for k, n := range nd.hits {
		out[HashKey(k)] += n
	}
	nd.hits = map[string]int{}
	return out
}

func (nd *fakeNode) has(key string) bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	o := nd.objs[key]
	return o != nil && !o.stale
}

// fakeOrigin counts requests per path and answers "body of PATH" with the
// Surrogate-Key header tags[path].
type fakeOrigin struct {
	mu   sync.Mutex
	n    map[string]int
	tags map[string]string
	fail bool
}

func (o *fakeOrigin) Fetch(ctx context.Context, req *http.Request) (*http.Response, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fail {
		return nil, errors.New("origin down")
	}
	o.n[req.URL.RequestURI()]++
	h := http.Header{"Date": {time.Now().UTC().Format(http.TimeFormat)}}
	if t := o.tags[req.URL.Path]; t != "" {
		h.Set("Surrogate-Key", t)
	}
	body := "body of " + req.URL.RequestURI()
	return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}, nil
}

func (o *fakeOrigin) count(uri string) int { o.mu.Lock(); defer o.mu.Unlock(); return o.n[uri] }

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 5 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func fakeRing(t *testing.T, n int, cfg replica.Config) (*fakeNet, []*fakePoP, *fakeOrigin) {
	fn := newFakeNet(t)
	o := &fakeOrigin{n: map[string]int{}, tags: map[string]string{}}
	var ps []*fakePoP
	for i := range n {
		ps = append(ps, fn.add(fmt.Sprintf("f%d", i), 0.5+float64(i)/100, cfg, o))
	}
	return fn, ps, o
}

// TestNoteOrigin: the origin's RTT for the plan is the first fetch's time,
// then smoothed with A = 1/8 (hand-computed).
func TestNoteOrigin(t *testing.T) {
	var m manager
	ms := time.Millisecond
	for _, c := range []struct{ d, want time.Duration }{
		{80 * ms, 80 * ms},
		{0, 70 * ms},        // 80 + (0 − 80)/8
		{150 * ms, 80 * ms}, // 70 + (150 − 70)/8
	} {
		m.noteOrigin(c.d)
		if got := time.Duration(m.originRTT.Load()); got != c.want {
			t.Fatalf("after %v: origin RTT %v, want %v", c.d, got, c.want)
		}
	}
}
