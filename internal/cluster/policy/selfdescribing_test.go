package policy_test

// This file is the whole of a new policy, dirhash, and the proof that adding
// a policy touches only internal/cluster/policy: it declares its traits
// where it is defined, and the simulator charges it by them, the live front
// routes with it, and the configuration template lists the [tuning] key it
// reads, without a line changed in internal/tools/sim, internal/cluster/front or
// internal/config.

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
	"time"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/policy"
	"shoal/internal/tools/sim"
)

// dirHash sends every URL of one directory to the same node: FNV-1a of the
// directory, salted with the seed, modulo the nodes, moving on to the next
// usable node. It reads the URL at the front, so it runs behind an l7 front
// (or behind the front the test gives it).
type dirHash struct {
	seed  uint64
	front policy.Front
}

func (p *dirHash) Name() string { return "dirhash" }

func (p *dirHash) Traits() policy.Traits {
	return policy.Traits{Placement: policy.AtFront, Front: p.front, Keys: []string{"seed"}}
}

func (p *dirHash) Pick(c *policy.Cluster, r *policy.Request) policy.Decision {
	n := len(c.Nodes)
	if n == 0 {
		return policy.None
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d %s", p.seed, path.Dir(r.URL))
	start := int(h.Sum64() % uint64(n))
	for k := range n {
		if i := (start + k) % n; c.Nodes[i].Usable() {
			return policy.Decision{Node: i, Fetch: -1}
		}
	}
	return policy.None
}

func (p *dirHash) Done(*policy.Cluster, int, *policy.Request) {}

// registry holds dirhash behind an l7 front and, to show the simulator reads
// the traits, the same policy declaring a layer-4 front.
func registry(t *testing.T) *policy.Registry {
	var r policy.Registry
	for name, f := range map[string]policy.Front{"dirhash": policy.FrontL7, "dirhash-l4": policy.FrontL4} {
		if err := r.Add(name, func(c policy.Config) policy.Policy { return &dirHash{seed: c.Seed, front: f} }); err != nil {
			t.Fatal(err)
		}
	}
	return &r
}

// TestSelfDescribingPolicySimulated: the simulator runs dirhash and charges
// it what its traits declare: behind an l7 front every request is a
// front→node handoff, behind a layer-4 switch none is.
func TestSelfDescribingPolicySimulated(t *testing.T) {
	var acc []sim.Access
	for i := range 400 {
		acc = append(acc, sim.Access{URL: fmt.Sprintf("/d%d/f%d.html", i%10, i%40), Size: 4096})
	}
	cases := []struct {
		name     string
		handoffs int64
	}{
		{"dirhash", 400},
		{"dirhash-l4", 0},
	}
	for _, c := range cases {
		res, err := sim.Run(sim.Config{Policy: c.name, Registry: registry(t), Nodes: 4, Seed: 1}, sim.NewSliceSource(acc))
		if err != nil {
			t.Fatal(err)
		}
		// 40 files, each read from disk once: the directory hash never sends
		// a file to a second node.
		if res.Requests != 400 || res.Handoffs != c.handoffs || res.DiskReads != 40 {
			t.Errorf("%s: %d requests, %d handoffs, %d disk reads; want 400, %d, 40",
				c.name, res.Requests, res.Handoffs, res.DiskReads, c.handoffs)
		}
	}
}

// TestSelfDescribingPolicyServes: the live front (relay path) routes with
// dirhash: every file of a directory comes from one node.
func TestSelfDescribingPolicyServes(t *testing.T) {
	var specs []control.NodeSpec
	for i := range 3 {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "node%d", i)
		}))
		defer ts.Close()
		specs = append(specs, control.NodeSpec{URL: ts.URL})
	}
	cl, err := control.New(&dirHash{seed: 1, front: policy.FrontL7}, specs, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := front.New(cl, front.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Serve(ln); close(done) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
	}()
	served := map[string]map[string]bool{} // directory → nodes
	for _, u := range []string{"/a/1", "/a/2", "/a/3", "/b/1", "/b/2", "/c/1", "/c/2", "/d/9"} {
		resp, err := http.Get("http://" + ln.Addr().String() + u)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(string(b), "node") {
			t.Fatalf("GET %s: %d %q %v", u, resp.StatusCode, b, err)
		}
		d := path.Dir(u)
		if served[d] == nil {
			served[d] = map[string]bool{}
		}
		served[d][string(b)] = true
	}
	nodes := map[string]bool{}
	for d, ns := range served {
		if len(ns) != 1 {
			t.Errorf("directory %s served by %v, want one node", d, ns)
		}
		for n := range ns {
			nodes[n] = true
		}
	}
	if len(nodes) < 2 {
		t.Errorf("4 directories all on %v: the policy's choice did not reach the front", nodes)
	}
}

// TestSelfDescribingPolicyConfigured: the configuration template's seed line
// names dirhash among the policies that read the key.
func TestSelfDescribingPolicyConfigured(t *testing.T) {
	s, err := registry(t).TuningTemplate()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s, "\nseed = 0                       # dirhash/dirhash-l4/p2c: ") {
		t.Errorf("seed line does not name dirhash:\n%s", s)
	}
}
