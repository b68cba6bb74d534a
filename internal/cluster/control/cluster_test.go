package control

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/cluster/placement"
	"shoal/internal/cluster/policy"
)

// firstUsable picks the lowest-index usable node; enough to test the
// control plane without depending on a real policy's sequence.
type firstUsable struct{ done []int }

func (firstUsable) Name() string { return "first" }
func (firstUsable) Pick(c *policy.Cluster, r *policy.Request) policy.Decision {
	for i := range c.Nodes {
		if c.Nodes[i].Usable() {
			return policy.Decision{Node: i, Fetch: -1}
		}
	}
	return policy.None
}
func (f *firstUsable) Done(c *policy.Cluster, node int, r *policy.Request) {
	f.done = append(f.done, node)
}

func newTest(t *testing.T, urls ...string) (*Cluster, *firstUsable) {
	t.Helper()
	p := &firstUsable{}
	var specs []NodeSpec
	for _, u := range urls {
		specs = append(specs, NodeSpec{URL: u})
	}
	c, err := New(p, specs, Options{Clock: func() time.Duration { return time.Second }})
	if err != nil {
		t.Fatal(err)
	}
	return c, p
}

func TestPickDoneCounters(t *testing.T) {
	c, p := newTest(t, "http://127.0.0.1:1", "http://127.0.0.1:2")
	r := &policy.Request{URL: "/a", Holder: -1}
	d, b := c.Pick(r)
	if d.Node != 0 || b.Addr != "127.0.0.1:1" {
		t.Fatalf("pick = %d %v, want node 0 at 127.0.0.1:1", d.Node, b)
	}
	if r.Now != time.Second {
		t.Errorf("Now = %v, want the clock's 1s", r.Now)
	}
	if got := c.Nodes()[0].Active; got != 1 {
		t.Errorf("active after pick = %d, want 1", got)
	}
	c.Done(b, r)
	if got := c.Nodes()[0].Active; got != 0 || b.InFlight.Load() != 0 || b.Requests.Load() != 1 {
		t.Errorf("after done: active %d inflight %d requests %d, want 0 0 1", got, b.InFlight.Load(), b.Requests.Load())
	}
	if len(p.done) != 1 || p.done[0] != 0 {
		t.Errorf("policy Done calls = %v, want [0]", p.done)
	}
}

func TestPickExceptRestoresNode(t *testing.T) {
	c, _ := newTest(t, "http://127.0.0.1:1", "http://127.0.0.1:2")
	d, b := c.PickExcept(&policy.Request{URL: "/a"}, 0)
	if d.Node != 1 {
		t.Fatalf("PickExcept(0) chose %d, want 1", d.Node)
	}
	c.Done(b, &policy.Request{})
	if d, _ := c.Pick(&policy.Request{URL: "/a"}); d.Node != 0 {
		t.Fatalf("after PickExcept node 0 should be back, got %d", d.Node)
	}
	// Excluding the only usable node leaves none.
	c2, _ := newTest(t, "http://127.0.0.1:1")
	if d, b := c2.PickExcept(&policy.Request{}, 0); d.Node != -1 || b != nil {
		t.Fatalf("PickExcept of the only node = %d, want -1", d.Node)
	}
}

func TestWeightRemoveAdd(t *testing.T) {
	c, _ := newTest(t, "http://127.0.0.1:1", "http://127.0.0.1:2")
	if err := c.SetWeight(0, 0); err != nil {
		t.Fatal(err)
	}
	if d, _ := c.Pick(&policy.Request{}); d.Node != 1 {
		t.Fatalf("drained node 0 still chosen: %d", d.Node)
	}
	if err := c.Remove(1); err != nil {
		t.Fatal(err)
	}
	if d, _ := c.Pick(&policy.Request{}); d.Node != -1 {
		t.Fatalf("all drained or removed should give -1, got %d", d.Node)
	}
	if err := c.SetWeight(1, 3); !errors.Is(err, ErrNoNode) {
		t.Errorf("SetWeight on removed node: err = %v, want ErrNoNode", err)
	}
	if _, err := c.Add(NodeSpec{URL: "http://127.0.0.1:1"}); err == nil {
		t.Error("adding a duplicate URL succeeded")
	}
	i, err := c.Add(NodeSpec{URL: "http://127.0.0.1:3", Weight: 2})
	if err != nil || i != 2 {
		t.Fatalf("Add = %d, %v; want slot 2", i, err)
	}
	if n := len(c.Nodes()); n != 2 {
		t.Errorf("live nodes = %d, want 2", n)
	}
	for _, bad := range []string{"127.0.0.1:9", "ftp://x:1", "http://"} {
		if _, err := c.Add(NodeSpec{URL: bad}); err == nil {
			t.Errorf("Add(%q) accepted a bad URL", bad)
		}
	}
}

func TestFailedMarksDownAndEmits(t *testing.T) {
	c, _ := newTest(t, "http://127.0.0.1:1", "http://127.0.0.1:2")
	var events []Event
	c.OnChange(func(e Event) { events = append(events, e) })
	_, b := c.Pick(&policy.Request{})
	c.Failed(b, errors.New("reset"))
	c.Done(b, &policy.Request{})
	if d, _ := c.Pick(&policy.Request{}); d.Node != 1 {
		t.Fatalf("failed node still chosen: %d", d.Node)
	}
	if len(events) != 1 || events[0] != (Event{Node: 0, Kind: "down"}) {
		t.Errorf("events = %v, want one down for node 0", events)
	}
}

func TestCheckRiseFall(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.shoal/status" || !healthy.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(w).Encode(Status{CPUPercent: 42, CacheHitRatio: 0.5, HandoffSocket: "/tmp/x.sock"})
	}))
	defer srv.Close()
	c, _ := newTest(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Check(ctx, CheckConfig{Interval: 10 * time.Millisecond, Rise: 2, Fall: 2})

	waitFor(t, "status stored", func() bool { s := c.backends[0].LastStatus(); return s != nil && s.HandoffSocket == "/tmp/x.sock" })
	if n := c.Nodes()[0]; n.Load != 0.42 || n.HitRatio != 0.5 {
		t.Errorf("load %v hit %v, want 0.42 and 0.5 from the report", n.Load, n.HitRatio)
	}
	healthy.Store(false)
	waitFor(t, "node down", func() bool { return !c.Nodes()[0].Up })
	healthy.Store(true)
	waitFor(t, "node up again", func() bool { return c.Nodes()[0].Up })
}

// A node marked down by a failed request needs Rise good checks after the
// failure, although the checker had seen many good ones before it
// (it used to come back after one).
func TestRiseCountsFromAFailedRequest(t *testing.T) {
	var checks atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checks.Add(1)
		json.NewEncoder(w).Encode(Status{})
	}))
	defer srv.Close()
	c, _ := newTest(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const rise = 4
	go c.Check(ctx, CheckConfig{Interval: 5 * time.Millisecond, Rise: rise, Fall: 2})
	waitFor(t, "ten good checks", func() bool { return checks.Load() >= 10 })
	c.Failed(c.backends[0], errors.New("reset"))
	after := checks.Load()
	waitFor(t, "node up again", func() bool { return c.Nodes()[0].Up })
	// One check may have been in flight at the failure (counted in after
	// or not); it must not count, so at least rise answers came after.
	if n := checks.Load() - after; n < rise {
		t.Fatalf("node up after %d checks answered since the failure, want >= %d", n, rise)
	}
}

// waitFor polls cond for up to 5 s; it asserts an eventual state, not a time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPanicModeWhenAllMarkedDown(t *testing.T) {
	c, _ := newTest(t, "http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3")
	var events []Event
	c.OnChange(func(e Event) { events = append(events, e) })
	c.SetUp(0, false)
	c.SetUp(1, false)
	if d, _ := c.Pick(&policy.Request{}); d.Node != 2 {
		t.Fatalf("with node 2 up, pick = %d, want 2 (no panic)", d.Node)
	}
	if err := c.SetWeight(2, 0); err != nil { // drained: never panicked back in
		t.Fatal(err)
	}
	events = nil
	d, b := c.Pick(&policy.Request{})
	if d.Node != 0 || b == nil {
		t.Fatalf("all with weight down: pick = %d, want 0 (panic mode ignores health)", d.Node)
	}
	if len(events) != 1 || events[0] != (Event{Node: 0, Kind: "panic"}) {
		t.Errorf("events = %v, want one panic for node 0", events)
	}
	if n := c.Nodes(); n[0].Up || n[1].Up {
		t.Errorf("panic mode changed health: %+v", n)
	}
	if d, _ := c.PickExcept(&policy.Request{}, 0); d.Node != 1 {
		t.Errorf("panic PickExcept(0) = %d, want 1", d.Node)
	}
	c.Remove(1)
	if d, _ := c.PickExcept(&policy.Request{}, 0); d.Node != -1 {
		t.Errorf("only the excluded node left: pick = %d, want -1", d.Node)
	}
}

// TestParseNodeURL: the one check every node URL passes, from --nodes, the
// config file or the admin API: an http URL with a host
// and an explicit port and nothing else, since anything else would be
// ignored or misused by the front (a path is never prefixed to requests,
// userinfo would never be sent, https is not spoken to nodes).
func TestParseNodeURL(t *testing.T) {
	cases := []struct {
		url, addr string // addr "" means refused
		why       string // substring of the error
	}{
		{"http://127.0.0.1:9001", "127.0.0.1:9001", ""},
		{"HTTP://127.0.0.1:9001", "127.0.0.1:9001", ""},
		{"http://node1.example:80", "node1.example:80", ""},
		{"http://[::1]:9001", "[::1]:9001", ""},
		{"http://127.0.0.1", "", "no port"},
		{"http://127.0.0.1:", "", "no port"},
		{"http://127.0.0.1:0", "", "port"},
		{"http://127.0.0.1:70000", "", "port"},
		{"http://127.0.0.1:x", "", "port"},
		{"http://127.0.0.1:9001/", "", "path"},
		{"http://127.0.0.1:9001/admin", "", "path"},
		{"http://127.0.0.1:9001?a=b", "", "query"},
		{"http://127.0.0.1:9001?", "", "query"},
		{"http://127.0.0.1:9001#f", "", "fragment"},
		{"http://user:pw@127.0.0.1:9001", "", "user"},
		{"http://user@127.0.0.1:9001", "", "user"},
		{"https://127.0.0.1:9001", "", "scheme"},
		{"ftp://x:1", "", "scheme"},
		{"file:///etc/passwd", "", "scheme"},
		{"unix:///tmp/x.sock", "", "scheme"},
		{"127.0.0.1:9001", "", "http://"},
		{"//127.0.0.1:9001", "", "scheme"},
		{"http://", "", "host"},
		{"http://:9001", "", "host"},
		{"http:127.0.0.1:9001", "", "host"},
		{"", "", "http://"},
		{" http://127.0.0.1:9001", "", ""},
	}
	for _, c := range cases {
		addr, err := ParseNodeURL(c.url)
		if c.addr != "" {
			if err != nil || addr != c.addr {
				t.Errorf("ParseNodeURL(%q) = %q, %v; want %q", c.url, addr, err, c.addr)
			}
			continue
		}
		if err == nil {
			t.Errorf("ParseNodeURL(%q) = %q, accepted; want refused (%s)", c.url, addr, c.why)
			continue
		}
		if !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), "fix:") {
			t.Errorf("ParseNodeURL(%q) error %q: want it to mention %q and a fix", c.url, err, c.why)
		}
	}
}

// TestSetStorage: the placement given to the cluster reaches the policy's
// view, so a holder-aware policy (lard) picks the node that stores the URL.
func TestSetStorage(t *testing.T) {
	p, err := policy.New("lard", policy.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(p, []NodeSpec{{URL: "http://127.0.0.1:1"}, {URL: "http://127.0.0.1:2"}, {URL: "http://127.0.0.1:3"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Hand-checked in internal/cluster/placement: with R = 1 over n0, n1 (weight
	// 1) and n2 (weight 2), /a/b.css is stored on node 2.
	c.SetStorage(&policy.Storage{Nodes: []placement.Node{{ID: "n0", Weight: 1}, {ID: "n1", Weight: 1}, {ID: "n2", Weight: 2}}, Replicas: 1})
	if d, _ := c.Pick(&policy.Request{URL: "/a/b.css", Size: -1, Holder: -1}); d.Node != 2 {
		t.Errorf("picked node %d, want the holder 2", d.Node)
	}
}

// TestMembers: the slots' addresses in index order, a removed node's
// blank, an added node's appended (slots are never reused).
func TestMembers(t *testing.T) {
	c, _ := newTest(t, "http://10.0.0.1:80", "http://10.0.0.2:8081")
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"start", func() error { return nil }, "10.0.0.1:80,10.0.0.2:8081"},
		{"remove 0", func() error { return c.Remove(0) }, ",10.0.0.2:8081"},
		{"add", func() error { _, err := c.Add(NodeSpec{URL: "http://10.0.0.3:80"}); return err }, ",10.0.0.2:8081,10.0.0.3:80"},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(c.Members(), ","); got != s.want {
			t.Errorf("%s: Members() = %q, want %q", s.name, got, s.want)
		}
	}
}
