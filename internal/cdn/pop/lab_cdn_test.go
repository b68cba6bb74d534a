//go:build linux

package pop

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"shoal/internal/cdn/wan"
	"shoal/internal/cluster/node"
	"shoal/internal/tools/site"
)

// fetchIn GETs url from inside namespace i (HTTP/1.0 on a connection
// dialled there) and returns status, X-Cache and body.
func (l *lab) fetchIn(i int, method, url string) (int, string, string, error) {
	var code int
	var how, body string
	err := l.inNS(i, func() error {
		c, host, path, tok, err := l.dialToken(url, 5*time.Second, 10*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		extra := ""
		if method == "GETLOCAL" { // a holder's question: 200 only if held there (RFC 9111 only-if-cached)
			method, extra = "GET", "Cache-Control: only-if-cached\r\n\r\n"
		} else if method == "POST" {
			extra = "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
		} else {
			extra = "\r\n"
		}
		fmt.Fprintf(c, "%s /%s HTTP/1.0\r\nHost: %s\r\nAuthorization: Bearer %s\r\n%s", method, path, host, tok, extra)
		r, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		code, how, body = r.StatusCode, r.Header.Get("X-Cache"), string(b)
		return nil
	})
	return code, how, body, err
}

// digIn asks PoP j's DNS from namespace i, as dig @pop +subnet=… would.
func (l *lab) digIn(i, j int, subnet string) (string, error) {
	var ans string
	err := l.inNS(i, func() error {
		m := new(dns.Msg)
		m.SetQuestion("www.cdn.lab.", dns.TypeA)
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP(subnet).To4()})
		m.Extra = append(m.Extra, o)
		c := &dns.Client{Timeout: 2 * time.Second}
		r, _, err := c.Exchange(m, wan.Addr(j).String()+":5353")
		if err != nil {
			return err
		}
		if len(r.Answer) != 1 {
			ans = dns.RcodeToString[r.Rcode]
			return nil
		}
		ans = r.Answer[0].(*dns.A).A.String()
		return nil
	})
	return ans, err
}

// TestLabCDN is the CDN lab: five PoPs over the WAN switch, each with the
// content tier on its nodes and DNS, the origin being a shoal node serving
// the sample site in pop0's namespace.
func TestLabCDN(t *testing.T) {
	l := newLab(t)
	dir := l.dir
	// Coverage: 198.51.i.0/24 belongs to pop i.
	var cov strings.Builder
	for i := range 5 {
		fmt.Fprintf(&cov, "198.51.%d.0/24,pop%d\n", i, i)
	}
	covFile := writeSeed(t, dir, "coverage.csv", cov.String())
	originCmd, origin := l.startOrigin(0)
	start := func(i int) *exec.Cmd {
		a := wan.Addr(i).String()
		// A 3 s replication window, hot at 3 requests: hot push shows
		// within the test.
		conf := writeSeed(t, dir, fmt.Sprintf("pop%d.toml", i), fmt.Sprintf("name = \"pop%d\"\nseed_file = %q\n[content]\nwindow = \"3s\"\nhot_min = 3\ndir_ttl = \"1m\"\n", i, l.seed))
		return l.start(i, l.seed, i > 0, "--config", conf, "--origin", origin,
			"--dns", a+":5353", "--zone", "cdn.lab.", "--coverage", covFile)
	}
	all := []int{0, 1, 2, 3, 4}
	for _, i := range all {
		l.procs = append(l.procs, start(i))
		l.waitUp(i)
	}
	l.procs = append(l.procs, originCmd) // after the PoPs: procs[i] is pop i
	l.until("views converge", 60*time.Second, func() bool {
		vs := l.views(all)
		for _, i := range all {
			if len(aliveSet(vs[i])) != 5 {
				return false
			}
		}
		return true
	})
	edge := func(i int) string { return "http://" + wan.Addr(i).String() + ":8080" }

	// DNS: the prefix's PoP, from any PoP's responder (once every PoP has
	// reported its server performance round the ring).
	l.until("dns answers each prefix's PoP", 30*time.Second, func() bool {
		for _, i := range all {
			if got, err := l.digIn(i, (i+2)%5, fmt.Sprintf("198.51.%d.0", i)); err != nil || got != wan.Addr(i).String() {
				t.Logf("dig @pop%d +subnet=198.51.%d.0/24 from pop%d: %q %v", (i+2)%5, i, i, got, err)
				return false
			}
		}
		return true
	})

	// Far content: /docs/index.html asked at pop0 (next to the origin),
	// then at pop4 (80 ms away): fetched from a PoP holding it, then local.
	if code, how, _, err := l.fetchIn(0, "GET", edge(0)+"/docs/index.html"); err != nil || code != 200 || how != "MISS" {
		t.Fatalf("pop0 first GET: %d %s %v", code, how, err)
	}
	var c4 ContentStatsView
	if code, how, _, err := l.fetchIn(4, "GET", edge(4)+"/docs/index.html"); err != nil || code != 200 || how != "MISS" {
		t.Fatalf("pop4 first GET: %d %s %v", code, how, err)
	}
	if code, how, _, err := l.fetchIn(4, "GET", edge(4)+"/docs/index.html"); err != nil || code != 200 || how != "HIT" {
		t.Fatalf("pop4 second GET: %d %s %v (want a local HIT)", code, how, err)
	}
	l.getIn(4, l.admin(4)+"/content", &c4)
	if c4.Counts["remote_fetches"]+c4.Counts["shield_fetches"] < 1 || c4.Counts["origin_fetches"] != 0 {
		t.Fatalf("pop4 counters: %v (want a PoP fetch, no origin fetch)", c4.Counts)
	}
	t.Logf("pop4 after far content: %v", c4.Counts)

	// 50 concurrent misses for one URL at pop3 → one origin fetch in all.
	originFetches := func() uint64 {
		var n uint64
		for _, i := range all {
			var v ContentStatsView
			l.getIn(i, l.admin(i)+"/content", &v)
			n += v.Counts["origin_fetches"]
		}
		return n
	}
	before := originFetches()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.fetchIn(3, "GET", edge(3)+"/img/index.html")
		}()
	}
	wg.Wait()
	if d := originFetches() - before; d != 1 {
		t.Fatalf("50 concurrent misses at pop3: %d origin fetches, want 1", d)
	}

	// Purge /docs/index.html from pop2: every PoP confirms, none holds it.
	var res PurgeResult
	code, _, body, err := l.fetchIn(2, "POST", l.admin(2)+"/purge?url=/docs/index.html")
	if err != nil || code != 200 {
		t.Fatalf("purge: %d %v %s", code, err, body)
	}
	if err := jsonUnmarshal(body, &res); err != nil || len(res.Confirmed) != 5 {
		t.Fatalf("purge: %s %v", body, err)
	}
	t.Logf("purge confirmed by all 5 PoPs in %.3f s (bound: 5 s, the confirmation timeout)", res.Seconds)
	if _, how, _, _ := l.fetchIn(4, "GET", edge(4)+"/docs/index.html"); how != "MISS" {
		t.Fatalf("pop4 after purge: %s, want MISS", how)
	}

	// Hot content: asked 5 times at pop2, it appears at every PoP.
	for range 5 {
		l.fetchIn(2, "GET", edge(2)+"/static/index.html")
	}
	d := l.until("hot content at every PoP", 20*time.Second, func() bool {
		for _, i := range all {
			if code, _, _, err := l.fetchIn(i, "GETLOCAL", edge(i)+"/static/index.html"); err != nil || code != 200 {
				return false
			}
		}
		return true
	})
	t.Logf("hot /static/index.html held by all 5 PoPs %v after its 5th request (window 3 s)", d)

	// A killed PoP is not answered: pop1's prefix gets a live PoP.
	l.procs[1].Process.Kill()
	l.procs[1].Wait()
	d = l.until("dns answers a live PoP for pop1's prefix", 30*time.Second, func() bool {
		got, err := l.digIn(0, 0, "198.51.1.0")
		return err == nil && got != wan.Addr(1).String() && got != "SERVFAIL"
	})
	t.Logf("pop1's prefix answered by a live PoP %v after the kill", d)
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// startOrigin runs a shoal node serving the sample site (fresh for five
// minutes) in namespace i on port 8090, and returns it and its URL; the
// caller adds it to l.procs.
func (l *lab) startOrigin(i int) (*exec.Cmd, string) {
	root := filepath.Join(l.dir, "origin-site")
	if _, err := site.Generate(root, site.Config{}); err != nil {
		l.t.Fatal(err)
	}
	rules := "[[headers]]\nmatch = \"/\"\ncache_control = \"public, max-age=300\"\n"
	if err := os.WriteFile(filepath.Join(root, node.SiteFile), []byte(rules), 0o644); err != nil {
		l.t.Fatal(err)
	}
	addr := wan.Addr(i).String() + ":8090"
	cmd := l.w.Exec(context.Background(), i, l.bin, "node", "--root", root, "--listen", addr, "--cache-mb", "8")
	out, _ := os.Create(filepath.Join(l.dir, "origin.log"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	return cmd, "http://" + addr
}
