package pop

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/peerwire"
)

func testConfig(t *testing.T, name, seed string, join []string, data string) Config {
	c := DefaultConfig()
	c.Name = name
	c.Peer = "127.0.0.1:0"
	c.Join = join
	c.SeedFile = seed
	c.JoinTimeout = 20 * time.Second
	c.SampleEvery = 100 * time.Millisecond
	c.Cluster.Listen, c.Cluster.Admin, c.Cluster.Nodes, c.Cluster.CacheMB, c.Cluster.DataDir = "127.0.0.1:0", "127.0.0.1:0", 1, 8, data
	c.MBPP.Hold = 20 * time.Millisecond
	c.MBPP.AckTimeout = 200 * time.Millisecond
	c.Chord.Stabilise, c.Chord.FixFingers = 50*time.Millisecond, 20*time.Millisecond
	c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return c
}

func writeSeed(t *testing.T, dir, name, s string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startPoPs starts n PoPs named prefix0, prefix1, …: the first alone, the
// others joining it, all sharing seed and data. tune (nil: none) adjusts
// each config before its start. They close when the test ends.
func startPoPs(t *testing.T, n int, prefix, seed, data string, tune func(*Config)) []*PoP {
	t.Helper()
	var pops []*PoP
	t.Cleanup(func() {
		for _, p := range pops {
			p.Close()
		}
	})
	for i := range n {
		var join []string
		if i > 0 {
			join = []string{pops[0].PeerAddr}
		}
		c := testConfig(t, fmt.Sprintf("%s%d", prefix, i), seed, join, data)
		if tune != nil {
			tune(&c)
		}
		p, err := Start(c)
		if err != nil {
			t.Fatal(err)
		}
		pops = append(pops, p)
	}
	return pops
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func TestThreePoPsFormOneViewAndOneRing(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	seed := writeSeed(t, dir, "seed", "0123456789abcdef0123456789abcdef")
	pops := startPoPs(t, 3, "pop", seed, data, nil)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		for _, p := range pops {
			var v PopsView
			getJSON(t, p.AdminURL+"/pops", &v)
			if v.Members != 3 {
				ok = false
			}
			for _, e := range v.Peers {
				if !e.Alive || (!e.Self && e.RTTms == 0) {
					ok = false // every link measured
				}
			}
		}
		// One Chord ring: following successors from any PoP visits all three.
		seen := map[string]bool{}
		cur := pops[0]
		for range 3 {
			var c ChordView
			getJSON(t, cur.AdminURL+"/chord", &c)
			seen[c.ID] = true
			if len(c.Successors) == 0 {
				ok = false
				break
			}
			next := fmt.Sprintf("%016x", uint64(c.Successors[0].ID))
			cur = nil
			for _, p := range pops {
				if fmt.Sprintf("%016x", p.ID) == next {
					cur = p
				}
			}
			if cur == nil {
				ok = false
				break
			}
		}
		if ok && len(seen) == 3 && cur == pops[0] {
			break
		}
		if time.Now().After(deadline) {
			for _, p := range pops {
				v, c := p.Pops(), p.Chord()
				t.Logf("%s: members %d %+v chord succ %v pred %v", v.Self, v.Members, v.Peers, c.Successors, c.Predecessor)
			}
			t.Fatal("the three PoPs did not form one view and one Chord ring")
		}
		time.Sleep(100 * time.Millisecond)
	}
	r, err := http.Get(pops[1].AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	for _, want := range []string{`shoal_pop_peer_alive{peer="pop2"} 1`, "shoal_pop_members 3", "shoal_pop_chord_successors"} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}

	// A newcomer with another seed is refused, plainly, and counted.
	bad := writeSeed(t, dir, "bad", "another seed, not the DCDN's one")
	_, err = Start(testConfig(t, "intruder", bad, []string{pops[2].PeerAddr}, data))
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "seed") {
		t.Fatalf("wrong seed: %v", err)
	}
	t.Logf("wrong seed: %v", err)
	time.Sleep(100 * time.Millisecond)
	if pops[2].Refused() != 1 {
		t.Fatalf("refusal counted %d times", pops[2].Refused())
	}
}

// Strangers who open peer connections and never authenticate hold at most
// maxHandshakes of them; the rest are closed at once and counted, and a PoP
// with the seed still joins once the strangers go (peer messages
// are authenticated before anything is allocated, every queue has a bound).
func TestPeerPortBoundsStrangers(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	seed := writeSeed(t, dir, "seed", "0123456789abcdef0123456789abcdef")
	a, err := Start(testConfig(t, "a", seed, nil, data))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const strangers = maxHandshakes + 100
	var conns []net.Conn
	for range strangers {
		c, err := net.Dial("tcp", a.PeerAddr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.links.handshakesRefused.Load() < strangers-maxHandshakes {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d silent connections refused, want at least %d", a.links.handshakesRefused.Load(), strangers, strangers-maxHandshakes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range conns {
		c.Close()
	}
	// The strangers' slots free as a's handshakes see them go; a joiner
	// arriving before that is refused like any other connection over the bound.
	for a.links.handshaking.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d handshakes still pending after the strangers left", a.links.handshaking.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	b, err := Start(testConfig(t, "b", seed, []string{a.PeerAddr}, data))
	if err != nil {
		t.Fatalf("a PoP with the seed could not join after the strangers left: %v", err)
	}
	b.Close()
}

// Slow hellos from one address hold at most maxHandshakesPerIP of the peer
// port's handshake slots, so a PoP with the seed still joins while a
// stranger keeps every connection it can half-open. Each stranger sends a
// well-formed hello and then nothing: the handshake deadline, not the
// longer frame read timeout, bounds how long each slot is held.
func TestPeerPortSlowHellosFromOneAddress(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	seed := writeSeed(t, dir, "seed", "0123456789abcdef0123456789abcdef")
	a, err := Start(testConfig(t, "a", seed, nil, data))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	for i := range maxHandshakes {
		c, err := d.Dial("tcp", a.PeerAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		h := []byte{peerwire.Version}
		h = binary.BigEndian.AppendUint64(h, uint64(1000+i))
		c.Write(append(h, make([]byte, 32)...))
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.links.handshaking.Load()+a.links.handshakesRefused.Load() < maxHandshakes {
		if time.Now().After(deadline) {
			t.Fatal("the stalled hellos were never seen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := a.links.handshaking.Load(); n > maxHandshakesPerIP {
		t.Errorf("one address holds %d handshake slots, want at most %d", n, maxHandshakesPerIP)
	}
	b, err := Start(testConfig(t, "b", seed, []string{a.PeerAddr}, data))
	if err != nil {
		t.Fatalf("a PoP with the seed could not join while one address stalled %d hellos: %v", maxHandshakes, err)
	}
	b.Close()
}

// Authenticated inbound links are capped too: each holds two goroutines
// and a queue, so even holders of the seed cannot open them without bound.
// Links over the cap are closed at once and counted.
func TestPeerPortCapsLinks(t *testing.T) {
	dir := t.TempDir()
	seed := writeSeed(t, dir, "seed", "0123456789abcdef0123456789abcdef")
	a, err := Start(testConfig(t, "a", seed, nil, filepath.Join(dir, "data")))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.links.mu.Lock()
	a.links.maxLinks = 3
	a.links.mu.Unlock()
	key, _ := os.ReadFile(seed)
	var open int
	for i := range 6 {
		nc, err := net.Dial("tcp", a.PeerAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		cfg := peerwire.DefaultConfig(uint64(100+i), key)
		cfg.ReadTimeout = 500 * time.Millisecond
		c, err := peerwire.Client(nc, &cfg)
		if err != nil {
			continue
		}
		// A link over the cap is closed by a at once; one it keeps stays
		// open (a sends nothing to an ID outside its view).
		for {
			if _, err = c.Recv(); err != nil {
				break
			}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			open++
		}
	}
	if open != 3 {
		t.Errorf("%d links stayed open, want the cap of 3", open)
	}
	if n := a.Pops().Wire["links_refused"]; n != 3 {
		t.Errorf("links_refused = %d, want 3", n)
	}
}
