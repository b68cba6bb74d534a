package pop

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"shoal/internal/cdn/cdnsim"
	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/replica"
)

// TestSameDecisionsAsTheSimulator: one behaviour, both places. A request
// sequence runs through `shoal sim cdn`'s simulator, which reports where
// each request was served from (Config.OnRequest); the same sequence is then replayed,
// request by request, through live content managers and miss chains
// (the in-memory ring: the same PoP names, so the same ring IDs and the
// same homes), and each request must be served the same way: a hit at the
// ingress, a remote holder, the key's home as shield (the same home), or
// the origin. Registrations are let settle between requests, as the
// simulator delivers them at once.
func TestSameDecisionsAsTheSimulator(t *testing.T) {
	m, err := cdnsim.Generate(cdnsim.DefaultGenConfig(4))
	if err != nil {
		t.Fatal(err)
	}
	cfg := cdnsim.DefaultConfig()
	cfg.PoPs, cfg.KillAt, cfg.Origin = 4, 0, m.Names[0]
	// The in-memory ring knows no RTTs: the shield is always taken
	// (TestShieldDetourLive checks the detour rule live).
	cfg.CDN.ShieldStretch = 0
	var w cdnsim.Workload
	rng := rand.New(rand.NewPCG(3, 4))
	urls := []string{"/a", "/b", "/c", "/d", "/e", "/f"}
	for i := range 80 {
		w.Requests = append(w.Requests, cdnsim.Request{At: time.Duration(i) * time.Second, Client: rng.IntN(4), URL: urls[rng.IntN(len(urls))], Size: 100})
	}
	w.Clients = 4
	var outs []cdnsim.Outcome
	cfg.OnRequest = func(i int, o cdnsim.Outcome) { outs = append(outs, o) }
	res, err := cdnsim.Run(cfg, m, &w)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != len(w.Requests) {
		t.Fatalf("%d outcomes for %d requests", len(outs), len(w.Requests))
	}
	// Each location has a PoP (named after it), its clients' nearest.
	ingress := func(client int) string {
		for _, n := range res.Names {
			if strings.HasSuffix(n, "-"+m.Names[client]) {
				return n
			}
		}
		t.Fatalf("no PoP at %s", m.Names[client])
		return ""
	}
	type decision struct {
		Request      cdnsim.Request
		PoP          string
		Source, From string
	}
	var trace []decision
	for i, o := range outs {
		d := decision{Request: w.Requests[i], PoP: ingress(w.Requests[i].Client), Source: "hit"}
		if !o.Hit {
			d.Source, d.From, _ = strings.Cut(o.Via, " ")
		}
		trace = append(trace, d)
	}

	rc := replica.DefaultConfig()
	rc.ShieldStretch = 0
	fn := newFakeNet(t)
	o := &fakeOrigin{n: map[string]int{}, tags: map[string]string{}}
	byName := map[string]*fakePoP{}
	for _, name := range res.Names {
		byName[name] = fn.add(name, 0.5, rc, o)
	}
	kinds := map[string]int{}
	for i, d := range trace {
		p := byName[d.PoP]
		st := p.m.stats
		r0, s0, o0 := st.RemoteFetches.Load(), st.ShieldFetches.Load(), st.OriginFetches.Load()
		body, how := p.get(d.Request.URL)
		if body != "body of "+d.Request.URL {
			t.Fatalf("request %d: %q", i, body)
		}
		got, from := "", ""
		switch {
		case how == "HIT":
			got = "hit"
		case st.RemoteFetches.Load() > r0:
			got = "remote"
		case st.ShieldFetches.Load() > s0:
			got, from = "shield", homeOf(fn, d.Request.URL).name
		case st.OriginFetches.Load() > o0:
			got = "origin"
		}
		want := d.Source
		if got != want || want == "shield" && from != d.From {
			t.Fatalf("request %d (%s at %s): live %s %s, simulator %s %s", i, d.Request.URL, d.PoP, got, from, want, d.From)
		}
		kinds[got]++
		settle(t, fn, urls)
	}
	t.Logf("%d requests, the same decision each time: %v", len(trace), kinds)
	for _, k := range []string{"hit", "remote", "shield"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the sequence: the comparison proves less than it should", k)
		}
	}
}

// homeOf is the key's home on the in-memory ring.
func homeOf(fn *fakeNet, uri string) *fakePoP {
	ids := fn.live()
	k := uint64(chord.ContentKey("", uri))
	i, _ := slices.BinarySearch(ids, k)
	return fn.pops[ids[i%len(ids)]]
}

// settle waits until every copy held is listed at its home.
func settle(t *testing.T, fn *fakeNet, urls []string) {
	t.Helper()
	eventually(t, "registrations settle", func() bool {
		for _, u := range urls {
			h := homeOf(fn, u)
			for _, p := range fn.pops {
				if p.node.has(u) && !slices.Contains(holders(h, u), p.id) {
					return false
				}
			}
		}
		return true
	})
}
