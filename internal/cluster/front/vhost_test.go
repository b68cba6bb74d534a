package front

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/internal/base/httpwire"
	"shoal/internal/base/vhost"
	"shoal/internal/cluster/control"
	"shoal/internal/cluster/node"
	"shoal/internal/cluster/policy"
)

// keyRecorder wraps a policy and records the content keys it is asked to
// place, to check that the tables are keyed by site + path.
type keyRecorder struct {
	policy.Policy
	mu   sync.Mutex
	keys map[string]bool
}

func (k *keyRecorder) Pick(c *policy.Cluster, r *policy.Request) policy.Decision {
	k.mu.Lock()
	k.keys[r.URL] = true
	k.mu.Unlock()
	return k.Policy.Pick(c, r)
}

func (k *keyRecorder) CloseConn(conn uint64) {
	if cc, ok := k.Policy.(policy.ConnCloser); ok {
		cc.CloseConn(conn)
	}
}

// siteObserver sums the front's observations per site.
type siteObserver struct {
	mu    sync.Mutex
	reqs  map[string]int
	bytes map[string]int64
}

func (o *siteObserver) Observe(ob Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reqs[ob.Site]++
	o.bytes[ob.Site] += ob.Bytes
}

// TestVHostsThreeSitesFourNodes serves three sites, whose files have the
// same names and different bytes, from four vhost nodes through the front
// on the relay and passfd paths under every policy, checks every body by
// SHA-256, and checks that the policy saw keys of the form site + path.
func TestVHostsThreeSitesFourNodes(t *testing.T) {
	sites := []string{"a.example", "b.example", "c.example"}
	root := t.TempDir()
	rng := rand.New(rand.NewPCG(15, 15))
	sums := map[string]string{} // site + path -> sha256
	names := []string{"/index.html", "/f1k.bin", "/f64k.bin", "/f600k.bin"}
	sizes := []int{200, 1 << 10, 64 << 10, 600 << 10}
	for _, s := range sites {
		for i, n := range names {
			b := make([]byte, sizes[i])
			for k := range b {
				b[k] = byte(rng.Uint32())
			}
			p := filepath.Join(root, s, n)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			sums[s+n] = hex.EncodeToString(sum[:])
		}
	}
	dir, err := os.MkdirTemp("", "shoal-vh-") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var specs []control.NodeSpec
	for i := range 4 {
		u, _ := passfdNodeCfg(t, node.Config{Root: root, VHosts: true}, dir, i)
		specs = append(specs, control.NodeSpec{URL: u})
	}
	vm, err := vhost.New(vhost.Config{Sites: sites})
	if err != nil {
		t.Fatal(err)
	}
	for _, pol := range policy.Names() {
		for _, pathName := range []string{"relay", "passfd"} {
			t.Run(pol+"/"+pathName, func(t *testing.T) {
				p, err := policy.New(pol, policy.Config{})
				if err != nil {
					t.Fatal(err)
				}
				rec := &keyRecorder{Policy: p, keys: map[string]bool{}}
				cl, err := control.New(rec, specs, control.Options{})
				if err != nil {
					t.Fatal(err)
				}
				obs := &siteObserver{reqs: map[string]int{}, bytes: map[string]int64{}}
				cfg := Config{VHosts: vm, Observer: obs}
				if pathName == "passfd" {
					checkSockets(t, cl, 100*time.Millisecond)
					cfg.Path = PassFD(PassFDConfig{})
				}
				_, addr := frontOn(t, cl, cfg)
				// Two rounds over one keep-alive connection per site, so
				// content-aware policies see repeats.
				for _, site := range sites {
					cl := dialFront(t, addr)
					for round := range 2 {
						for _, n := range names {
							host := site
							if round == 1 {
								host = strings.ToUpper(site) + ":80"
							}
							resp, body := cl.do("GET " + n + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n")
							sum := sha256.Sum256([]byte(body))
							if resp.StatusCode != 200 || hex.EncodeToString(sum[:]) != sums[site+n] {
								t.Fatalf("%s%s (Host %s): status %d, %d bytes, wrong SHA-256", site, n, host, resp.StatusCode, len(body))
							}
						}
					}
				}
				if pathName == "relay" {
					var body int64
					for _, n := range sizes {
						body += int64(2 * n)
					}
					// The front observes a request after writing its
					// answer: wait until the last one is in.
					for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
						obs.mu.Lock()
						n := obs.reqs[sites[len(sites)-1]]
						obs.mu.Unlock()
						if n >= 2*len(names) {
							break
						}
					}
					obs.mu.Lock()
					for _, site := range sites {
						if obs.reqs[site] != 2*len(names) || obs.bytes[site] < body {
							t.Errorf("observed %s: %d requests, %d bytes; want %d, over %d", site, obs.reqs[site], obs.bytes[site], 2*len(names), body)
						}
					}
					obs.mu.Unlock()
				}
				rec.mu.Lock()
				defer rec.mu.Unlock()
				for k := range rec.keys {
					if _, ok := sums[k]; !ok {
						t.Errorf("policy saw key %q, not site + path", k)
					}
				}
				if len(rec.keys) == 0 {
					t.Error("policy saw no key")
				}
			})
		}
	}
}

// TestContentKey checks the keys and that a repeated key costs nothing.
func TestContentKey(t *testing.T) {
	vm, err := vhost.New(vhost.Config{Sites: []string{"a.example"}, Aliases: map[string]string{"www.a.example": "a.example"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ head, want string }{
		{"GET /x?q=1 HTTP/1.1\r\nHost: a.example\r\n\r\n", "a.example/x"},
		{"GET /x HTTP/1.1\r\nHost: WWW.A.EXAMPLE:8080\r\n\r\n", "a.example/x"},
		{"GET /x HTTP/1.1\r\nHost: other.example\r\n\r\n", "_default/x"},
		{"GET http://a.example/y HTTP/1.1\r\nHost: other\r\n\r\n", "a.example/y"},
		{"GET http://a.example HTTP/1.1\r\nHost: other\r\n\r\n", "a.example/index.html"},
		{"GET /./d//e/?x HTTP/1.1\r\nHost: a.example\r\n\r\n", "a.example/d/e/index.html"},
		{"GET /f%2Eg HTTP/1.1\r\nHost: a.example\r\n\r\n", "a.example/f.g"},
		{"GET /z HTTP/1.0\r\n\r\n", "_default/z"},
	}
	var vh vhostState
	for _, c := range cases {
		var req httpwire.Request
		if _, err := httpwire.ParseRequest([]byte(c.head), &req); err != nil {
			t.Fatal(err)
		}
		if got := contentKey(vm, &req, "", &vh); got != c.want {
			t.Errorf("%q: key %q, want %q", c.head, got, c.want)
		}
		if got := contentKey(nil, &req, "", &vh); got != strings.TrimPrefix(c.want, vh.site) {
			t.Errorf("%q without vhosts: key %q", c.head, got)
		}
	}
	var req httpwire.Request
	httpwire.ParseRequest([]byte(cases[1].head), &req)
	prev := contentKey(vm, &req, "", &vh)
	if n := testing.AllocsPerRun(100, func() { prev = contentKey(vm, &req, prev, &vh) }); n != 0 {
		t.Errorf("repeated key allocates %v", n)
	}
}

// TestInternalKeyWithVHosts: the nodes' /.shoal/ space stays private when
// keys carry a site.
func TestInternalKeyWithVHosts(t *testing.T) {
	cases := []struct {
		key    string
		vhosts bool
		want   bool
	}{
		{"a.example/.shoal/status", true, true},
		{"_default/.shoal/repair", true, true},
		{"a.example/x", true, false},
		{"/.shoal/status", false, true},
		{"/x", false, false},
	}
	for _, c := range cases {
		if got := internalKey(c.key, c.vhosts); got != c.want {
			t.Errorf("internalKey(%q, %v) = %v", c.key, c.vhosts, got)
		}
	}
}

// TestRelayAbsoluteFormSendsAuthorityAsHost: an absolute-form request is
// relayed in origin-form with the target's authority as its only Host (RFC
// 9112 §3.2.2), so the node answers for the site the front keyed it by;
// the client's Host is not forwarded.
func TestRelayAbsoluteFormSendsAuthorityAsHost(t *testing.T) {
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Host", r.Host)
		fmt.Fprintf(w, "A %s", r.URL.Path)
	}))
	defer a.Close()
	addr, _, _ := startFront(t, Config{}, a.URL)
	c := dialFront(t, addr)
	resp, body := c.do("GET http://b.example:8080/p?q=1 HTTP/1.1\r\nHost: a.example\r\n\r\n")
	if resp.StatusCode != 200 || body != "A /p" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Seen-Host"); got != "b.example:8080" {
		t.Errorf("node saw Host %q, want the target's authority b.example:8080", got)
	}
}

// TestCacheKey: with Config.CacheKeys the key is the lower-cased host and
// the path and query, the absolute form's authority winning over Host, and
// a repeated key costs no allocation.
func TestCacheKey(t *testing.T) {
	cases := []struct{ head, want string }{
		{"GET /a?b=1 HTTP/1.1\r\nHost: Example.COM\r\n\r\n", "example.com/a?b=1"},
		{"GET /a?b=2 HTTP/1.1\r\nHost: example.com\r\n\r\n", "example.com/a?b=2"},
		{"GET http://A.example/y?q HTTP/1.1\r\nHost: other\r\n\r\n", "a.example/y?q"},
		{"GET http://a.example HTTP/1.1\r\nHost: other\r\n\r\n", "a.example/"},
		{"GET /.shoal/status HTTP/1.1\r\nHost: h:8080\r\n\r\n", "h:8080/.shoal/status"},
	}
	var vh vhostState
	for _, c := range cases {
		var req httpwire.Request
		if _, err := httpwire.ParseRequest([]byte(c.head), &req); err != nil {
			t.Fatal(err)
		}
		if got := cacheKey(&req, "", &vh); got != c.want {
			t.Errorf("%q: key %q, want %q", c.head, got, c.want)
		}
	}
	if !internalKey("h:8080/.shoal/status", true) {
		t.Error("a cache key into /.shoal/ is public")
	}
	var req httpwire.Request
	httpwire.ParseRequest([]byte(cases[0].head), &req)
	prev := cacheKey(&req, "", &vh)
	if n := testing.AllocsPerRun(100, func() { prev = cacheKey(&req, prev, &vh) }); n != 0 {
		t.Errorf("repeated key allocates %v", n)
	}
}
