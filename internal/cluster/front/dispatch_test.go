package front

import (
	"net"
	"sync"
	"testing"
	"time"

	"shoal/internal/base/vhost"
)

// pathObserver counts the front's observations by data path and site, and
// those that name no node.
type pathObserver struct {
	mu     sync.Mutex
	n      int
	byPath map[string]int
	bySite map[string]int
	noNode int
}

func (o *pathObserver) Observe(ob Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n++
	o.byPath[ob.Path]++
	o.bySite[ob.Site]++
	if ob.Node < 0 || ob.NodeURL == "" {
		o.noNode++
	}
}

func (o *pathObserver) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// TestDispatchFinishesOnce: whatever path moves a request — relay,
// redirect, hybrid, passfd from the raw accept loop or from a connection's
// goroutine, a connection a node handed back — it is routed once and
// finished once: the policy hears Done once per pick (every node's InFlight
// is back to 0, not below), the Observer sees it once with its node and its
// site, and Requests and Paths count it once. Three keep-alive connections
// send four requests each; a node that keeps a passed connection answers
// the later ones itself, so the front sees only the first of each.
func TestDispatchFinishesOnce(t *testing.T) {
	tcp := func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
	const conns, reqs = 3, 4
	for _, c := range []struct {
		name, pol string
		listen    func() (net.Listener, error)
		cfg       Config
		path      string // the path the observations name
		want      int    // requests the front sees
	}{
		{"relay", "wrr", tcp, Config{Path: Relay()}, "relay", conns * reqs},
		{"redirect", "wrr", tcp, Config{Path: Redirect()}, "redirect", conns * reqs},
		{"hybrid", "lard", tcp, Config{Path: Relay(), Choose: Hybrid(PassFD(PassFDConfig{})),
			Hybrid: HybridConfig{CPUPercent: -1, ActiveConns: -1, MinSize: 1, Size: func(string) int64 { return 1 << 20 }}}, "passfd", conns * reqs},
		{"passfd raw accept, node keeps", "wrr", deferredListen, Config{Path: PassFD(PassFDConfig{})}, "passfd", conns},
		{"passfd raw accept, hand back", "lard", deferredListen, Config{Path: PassFD(PassFDConfig{})}, "passfd", conns * reqs},
		{"passfd normal path, node keeps", "wrr", tcp, Config{Path: PassFD(PassFDConfig{}), noFastAccept: true}, "passfd", conns},
		{"passfd normal path, hand back", "lard", tcp, Config{Path: PassFD(PassFDConfig{}), noFastAccept: true}, "passfd", conns * reqs},
	} {
		t.Run(c.name, func(t *testing.T) {
			vm, err := vhost.New(vhost.Config{Sites: []string{"x"}})
			if err != nil {
				t.Fatal(err)
			}
			obs := &pathObserver{byPath: map[string]int{}, bySite: map[string]int{}}
			cfg := c.cfg
			cfg.Observer, cfg.VHosts = obs, vm
			addr, s, cl, _, urls, _ := passfdClusterOn(t, c.listen, c.pol, 2, cfg)
			for i := range conns {
				fc := dialFront(t, addr)
				for j := range reqs {
					resp, _ := fc.do(get(urls[(i*reqs+j)%len(urls)]))
					if want := map[bool]int{true: 302, false: 200}[c.path == "redirect"]; resp.StatusCode != want {
						t.Fatalf("connection %d request %d: status %d, want %d", i, j, resp.StatusCode, want)
					}
				}
			}
			// A handoff is finished when the send returns, which may be
			// after the node answered: wait for the observations.
			for end := time.Now().Add(5 * time.Second); obs.count() < c.want && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // and for any extra one
			obs.mu.Lock()
			defer obs.mu.Unlock()
			if obs.n != c.want || obs.byPath[c.path] != c.want || obs.bySite["x"] != c.want || obs.noNode != 0 {
				t.Errorf("observed %d requests (by path %v, by site %v, %d without a node); want %d, all %s on site x",
					obs.n, obs.byPath, obs.bySite, obs.noNode, c.want, c.path)
			}
			st := s.Stats()
			paths := uint64(0)
			for _, n := range st.Paths {
				paths += n
			}
			if st.Requests != uint64(c.want) || paths != uint64(c.want) {
				t.Errorf("Stats: %d requests, paths %v; want %d", st.Requests, st.Paths, c.want)
			}
			for _, b := range cl.Backends() {
				if n := b.InFlight.Load(); n != 0 {
					t.Errorf("node %d: %d requests in flight after all were answered; want 0 (Done once per pick)", b.Index, n)
				}
			}
		})
	}
}
