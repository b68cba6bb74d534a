package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/pop"
)

// TestPopCommand: shoal pop's command line, and a newcomer with a wrong
// seed exiting non-zero with a clear message.
func TestPopCommand(t *testing.T) {
	out, _, code := shoal(t, "pop", "--print-config")
	if code != 0 || !strings.Contains(out, "[mbpp]") || !strings.Contains(out, "weight_server = 3.0") {
		t.Fatalf("--print-config: %d %s", code, out)
	}
	_, errOut, code := shoal(t, "pop", "--seed-file", "x")
	if code == 0 || !strings.Contains(errOut, "no name") {
		t.Fatalf("no name: %d %s", code, errOut)
	}
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	os.Chmod(open, 0o644)
	_, errOut, code = shoal(t, "pop", "--name", "a", "--seed-file", open, "--peer", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--admin", "off")
	if code == 0 || !strings.Contains(errOut, "chmod 600") {
		t.Fatalf("readable seed: %d %s", code, errOut)
	}

	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	c := pop.DefaultConfig()
	c.Name, c.Peer, c.SeedFile = "founder", "127.0.0.1:0", good
	c.Cluster.Listen, c.Cluster.Admin, c.Cluster.Nodes, c.Cluster.CacheMB, c.Cluster.DataDir = "127.0.0.1:0", "off", 1, 8, filepath.Join(dir, "data")
	c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := pop.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("fedcba9876543210fedcba9876543210"), 0o600)
	_, errOut, code = shoal(t, "pop", "--name", "intruder", "--seed-file", bad, "--join", p.PeerAddr,
		"--peer", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--admin", "off", "--nodes", "1", "--data", filepath.Join(dir, "data"))
	if code == 0 || !strings.Contains(errOut, "do not share this seed") {
		t.Fatalf("wrong seed: exit %d, stderr %s", code, errOut)
	}
	for i := 0; i < 100 && p.Refused() == 0; i++ {
		time.Sleep(20 * time.Millisecond) // the founder's side of the handshake may finish after the client exits
	}
	if p.Refused() != 1 {
		t.Fatalf("founder counted %d refusals", p.Refused())
	}
}

// TestPopsSeed: `up --pops` accepts 1 to 64 PoPs and gives them one fresh
// 32-byte seed, readable by its owner only.
func TestPopsSeed(t *testing.T) {
	for _, n := range []int{0, 65, -1} {
		if _, _, err := popsSeed(n); err == nil {
			t.Errorf("popsSeed(%d) accepted", n)
		}
	}
	dir, seedFile, err := popsSeed(3)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	fi, err := os.Stat(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 32 || fi.Mode().Perm() != 0o600 || filepath.Dir(seedFile) != dir {
		t.Errorf("seed %s: %d bytes, mode %v, in %s; want 32 bytes, 0600, in %s", seedFile, fi.Size(), fi.Mode().Perm(), filepath.Dir(seedFile), dir)
	}
}

// TestPopFileCarriesEveryMBPPKnob: every tunable of mbpp.Config survives
// the file form (TOML and --print-config) and back, so none is reachable
// only from Go.
func TestPopFileCarriesEveryMBPPKnob(t *testing.T) {
	c := pop.DefaultConfig()
	m := &c.MBPP
	m.Hold, m.AckTimeout, m.Retries, m.LearningFactor = 7*time.Millisecond, 9*time.Millisecond, 5, 0.3
	m.WeightLink, m.WeightServer, m.LocalBonus, m.RTTRef = 2, 4, 0.2, 70*time.Millisecond
	m.RTTDeadband, m.ServerDeadband, m.PublishLinks, m.WatchdogRounds = 0.07, 0.03, 5, 4
	m.EstimateRTT = true
	got := popConfig(popFile(c), pop.DefaultConfig()).MBPP
	got.Accept, m.Accept = nil, nil // a func: not a knob
	if !reflect.DeepEqual(got, *m) {
		t.Errorf("MBPP through the file form:\n got %+v\nwant %+v", got, *m)
	}
}

// TestTryPoPsAvoidsTheHome: the demo's second PoP is never the file's home
// (it would hold the shield copy already), checked against a brute-force
// successor over many sets of names.
func TestTryPoPsAvoidsTheHome(t *testing.T) {
	key := chord.ContentKey("", pop.Key("", tryPath))
	for n := 2; n <= 6; n++ {
		for k := range 20 {
			var st popState
			for i := range n {
				st.PoPs = append(st.PoPs, popStateItem{Name: fmt.Sprintf("p%d-%d", k, i)})
			}
			best, bestD := -1, uint64(0)
			for i, p := range st.PoPs {
				if d := uint64(chord.Hash(p.Name)) - uint64(key); best < 0 || d < bestD {
					best, bestD = i, d
				}
			}
			a, b := tryPoPs(st)
			if b == best || a == b {
				t.Fatalf("n=%d: first %d, second %d, home %d", n, a, b, best)
			}
		}
	}
}

func TestRingsFormed(t *testing.T) {
	for _, tc := range []struct {
		ms   []ringMember
		want bool
	}{
		{[]ringMember{{1, 2, 3}, {2, 3, 3}, {3, 1, 3}}, true},
		{[]ringMember{{1, 2, 3}, {2, 1, 3}, {3, 1, 3}}, false}, // 3 is outside the cycle
		{[]ringMember{{1, 2, 3}, {2, 3, 2}, {3, 1, 3}}, false}, // 2 does not see all yet
		{[]ringMember{{1, 0, 3}, {2, 3, 3}, {3, 1, 3}}, false}, // 1 has no successor
		{nil, false},
	} {
		if got := ringsFormed(tc.ms); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.ms, got, tc.want)
		}
	}
}
