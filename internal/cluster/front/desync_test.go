package front

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The desync suite. Each attack in desyncAttacks goes out
// on one client connection; then other clients fetch files over the same
// pooled node connections and every victim must get its own file byte for
// byte. It runs on the relay path, on passfd and on hybrid, and, when
// haproxy is installed, the same bytes go through HAProxy in front of the
// same node so the answers can be compared (logged with -v).
//
// The attacker's own request is for desyncTarget, 100 KB: its body is
// spliced exactly (spliceN never reads past it), so whatever a node sends
// after it stays in the node connection's socket, where the next request on
// that pooled connection would find it.
const (
	desyncTarget = "/f4-0.bin" // 100 KB: relayed under hybrid (desyncHybridMin)
	smuggledPath = "/f6-1.bin" // 600 KB: what an attacker would make a victim get
	// desyncHybridMin makes hybrid relay desyncTarget and hand off 300 KB
	// and larger files, so both paths carry victims.
	desyncHybridMin = 200 << 10
)

var smuggled = "GET " + smuggledPath + " HTTP/1.1\r\nHost: x\r\n\r\n"

// desyncVictimFiles are what victims ask for: none is desyncTarget or
// smuggledPath, sizes 1 KB to 300 KB.
var desyncVictimFiles = []string{"/f0-0.bin", "/f1-1.bin", "/f2-2.bin", "/f3-0.bin", "/f5-1.bin", "/f0-2.bin"}

// desyncAttack is one attack shape. raw is written in parts with a short
// pause between them (a client that waits for 100 Continue, a body that
// trickles). relay lists the acceptable first final status on the relay
// path (hybrid relays desyncTarget too); passfd on the passfd path, where
// the node answers the client itself. closed: the connection must be closed
// after that answer.
type desyncAttack struct {
	name   string
	raw    []string
	relay  []int
	passfd []int
	closed bool
}

// reqHead builds "METHOD target HTTP/1.1" with Host: x and the given lines.
func reqHead(method, target string, lines ...string) string {
	return reqHeadV(method, target, "1.1", lines...)
}

func reqHeadV(method, target, version string, lines ...string) string {
	var b strings.Builder
	b.WriteString(method + " " + target + " HTTP/" + version + "\r\n")
	if version == "1.1" {
		b.WriteString("Host: x\r\n")
	}
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("\r\n")
	return b.String()
}

func chunkOf(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

func clOf(s string) string { return "Content-Length: " + strconv.Itoa(len(s)) }

// Statuses. A valid chunked body is one the node does not read: it answers
// and closes, and the close can reset the relay's node connection while the
// front still writes the body (502) — either is fine, neither desyncs.
var (
	s200       = []int{200}
	s200or502  = []int{200, 502}
	s400       = []int{400}
	s405       = []int{405}
	s405or502  = []int{405, 502}
	s501       = []int{501}
	chunkedSmg = chunkOf(smuggled) + "0\r\n\r\n"
)

// desyncAttacks is the attack table. Expectations are after the fix; the
// comments say what today's main did where it differed.
var desyncAttacks = []desyncAttack{
	// Connection naming a framing or routing field: refused (RFC 9110
	// §7.6.1: a sender must not list a field meant for all recipients).
	// main dropped Content-Length but forwarded the body: the node read
	// it as a new request and the next victim got smuggledPath.
	{"conn-names-cl", []string{reqHead("GET", desyncTarget, "Connection: Content-Length", clOf(smuggled)) + smuggled}, s400, s400, true},
	{"conn-names-cl-in-list", []string{reqHead("GET", desyncTarget, "Connection: keep-alive, content-length", clOf(smuggled)) + smuggled}, s400, s400, true},
	{"conn-names-cl-absent", []string{reqHead("GET", desyncTarget, "Connection: Content-Length") + smuggled}, s400, s400, true},
	{"conn-names-te", []string{reqHead("POST", desyncTarget, "Connection: Transfer-Encoding", "Transfer-Encoding: chunked") + chunkedSmg}, s400, s400, true},
	{"conn-names-host", []string{reqHead("GET", desyncTarget, "Connection: Host")}, s400, s400, true},
	{"conn-names-xff", []string{reqHead("GET", desyncTarget, "Connection: X-Forwarded-For", "X-Forwarded-For: 6.6.6.6")}, s200, s200, false},
	// Content-Length and Transfer-Encoding (RFC 9112 §6.3).
	{"cl-te", []string{reqHead("POST", desyncTarget, clOf(chunkedSmg), "Transfer-Encoding: chunked") + chunkedSmg}, s400, s400, true},
	{"te-cl", []string{reqHead("POST", desyncTarget, "Transfer-Encoding: chunked", clOf(chunkedSmg)) + chunkedSmg}, s400, s400, true},
	{"cl-dup-same", []string{reqHead("POST", desyncTarget, clOf(smuggled), clOf(smuggled)) + smuggled}, s400, s400, true},
	{"cl-dup-differing", []string{reqHead("GET", desyncTarget, "Content-Length: 0", clOf(smuggled)) + smuggled}, s400, s400, true},
	{"cl-comma-differing", []string{reqHead("GET", desyncTarget, "Content-Length: 0, "+strconv.Itoa(len(smuggled))) + smuggled}, s400, s400, true},
	{"cl-comma-same", []string{reqHead("GET", desyncTarget, fmt.Sprintf("Content-Length: %d, %d", len(smuggled), len(smuggled))) + smuggled}, s400, s400, true},
	{"cl-plus-sign", []string{reqHead("GET", desyncTarget, "Content-Length: +"+strconv.Itoa(len(smuggled))) + smuggled}, s400, s400, true},
	{"cl-inner-space", []string{reqHead("GET", desyncTarget, "Content-Length: 1 0") + smuggled}, s400, s400, true},
	{"cl-overflow", []string{reqHead("GET", desyncTarget, "Content-Length: 18446744073709551657") + smuggled}, s400, s400, true},
	{"cl-space-before-colon", []string{reqHead("GET", desyncTarget, "Content-Length : "+strconv.Itoa(len(smuggled))) + smuggled}, s400, s400, true},
	// Transfer-Encoding obfuscations.
	{"te-tab-valid", []string{reqHead("GET", desyncTarget, "Transfer-Encoding:\tchunked") + chunkedSmg}, s200or502, s200, false},
	{"te-case-valid", []string{reqHead("GET", desyncTarget, "Transfer-Encoding: cHuNkEd") + chunkedSmg}, s200or502, s200, false},
	{"te-chunked-identity", []string{reqHead("POST", desyncTarget, "Transfer-Encoding: chunked, identity") + chunkedSmg}, s400, s400, true},
	{"te-identity-chunked", []string{reqHead("POST", desyncTarget, "Transfer-Encoding: identity, chunked") + chunkedSmg}, s501, s501, true},
	{"te-xchunked", []string{reqHead("POST", desyncTarget, "Transfer-Encoding: xchunked") + chunkedSmg}, s501, s501, true},
	{"te-trailing-garbage", []string{reqHead("POST", desyncTarget, "Transfer-Encoding: chunked;x") + chunkedSmg}, s501, s501, true},
	{"te-vertical-tab", []string{reqHead("POST", desyncTarget, "Transfer-Encoding: \x0bchunked") + chunkedSmg}, s400, s400, true},
	{"te-space-before-colon", []string{reqHead("POST", desyncTarget, "Transfer-Encoding : chunked") + chunkedSmg}, s400, s400, true},
	{"te-two-fields", []string{reqHead("POST", desyncTarget, "Transfer-Encoding: chunked", "Transfer-Encoding: chunked") + chunkedSmg}, s400, s400, true},
	{"te-http10", []string{reqHeadV("POST", desyncTarget, "1.0", "Transfer-Encoding: chunked") + chunkedSmg}, s400, s400, true},
	// Chunked framing (RFC 9112 §7.1). The node never reads a chunked body
	// (it answers and closes), so on passfd these are answered 200; the
	// relay checks every byte it forwards. main answered 502 to these and
	// forwarded an extension without ';' as it came.
	{"chunk-size-overflow", []string{reqHead("GET", desyncTarget, "Transfer-Encoding: chunked") + "10000000000000000" + chunkOf(smuggled)[2:] + "0\r\n\r\n"}, s400, s200, true},
	{"chunk-ext-without-semicolon", []string{reqHead("GET", desyncTarget, "Transfer-Encoding: chunked") + fmt.Sprintf("%x x\r\n%s\r\n0\r\n\r\n", len(smuggled), smuggled)}, s400, s200, true},
	{"chunk-size-bare-lf", []string{reqHead("GET", desyncTarget, "Transfer-Encoding: chunked") + fmt.Sprintf("%x\n%s\r\n0\r\n\r\n", len(smuggled), smuggled)}, s400, s200, true},
	{"chunk-data-overrun", []string{reqHead("GET", desyncTarget, "Transfer-Encoding: chunked") + "3\r\n" + smuggled + "\r\n0\r\n\r\n"}, s400, s200, true},
	{"chunk-trailer-obs-fold", []string{reqHead("GET", desyncTarget, "Transfer-Encoding: chunked") + "0\r\n X: y\r\n\r\n" + smuggled}, s400, s200, true},
	{"chunk-then-pipelined", []string{reqHead("GET", desyncTarget, "Transfer-Encoding: chunked") + "0\r\n\r\n" + smuggled}, s200or502, s200, false},
	// Head syntax.
	{"bare-lf-head", []string{"GET " + desyncTarget + " HTTP/1.1\nHost: x\nContent-Length: " + strconv.Itoa(len(smuggled)) + "\n\n" + smuggled}, s400, s400, true},
	{"obs-fold-te", []string{reqHead("POST", desyncTarget, "X-A: 1", " Transfer-Encoding: chunked") + chunkedSmg}, s400, s400, true},
	{"nul-in-value", []string{reqHead("GET", desyncTarget, "X-A: a\x00b")}, s400, s400, true},
	{"two-hosts", []string{reqHead("GET", desyncTarget, "Host: y")}, s400, s400, true},
	// Bodies the node skips, and pipelining.
	{"get-with-body", []string{reqHead("GET", desyncTarget, clOf(smuggled)) + smuggled}, s200, s200, false},
	{"head-with-body", []string{reqHead("HEAD", desyncTarget, clOf(smuggled)) + smuggled}, s200, s200, false},
	{"http10-keepalive-body", []string{reqHeadV("GET", desyncTarget, "1.0", "Connection: keep-alive", clOf(smuggled)) + smuggled}, s200, s200, false},
	{"pipelined-cl0", []string{reqHead("GET", desyncTarget, "Content-Length: 0") + smuggled}, s200, s200, false},
	{"expect-100-continue", []string{reqHead("POST", desyncTarget, "Expect: 100-continue", clOf(smuggled)), smuggled}, s405or502, s405, false},
	{"conn-names-expect", []string{reqHead("POST", desyncTarget, "Connection: Expect", "Expect: 100-continue", clOf(smuggled)) + smuggled}, s405, s405, false},
	{"upgrade-h2c", []string{reqHead("GET", desyncTarget, "Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA")}, s200, s200, false},
	// Request-target forms (RFC 9112 §3.2). main relayed the first four as
	// "/" or the path, where the node refuses them.
	{"absolute-form-ftp", []string{reqHead("GET", "ftp://x"+desyncTarget)}, s400, s400, true},
	{"absolute-form-empty-host", []string{reqHead("GET", "http://"+desyncTarget)}, s400, s400, true},
	{"authority-form-get", []string{reqHead("GET", "x:80")}, s400, s400, true},
	{"asterisk-form-get", []string{reqHead("GET", "*")}, s400, s400, true},
	{"absolute-form-http", []string{reqHead("GET", "http://x"+desyncTarget)}, s200, s200, false},
	{"options-asterisk", []string{reqHead("OPTIONS", "*")}, s405, s405, false},
	{"connect", []string{reqHead("CONNECT", "x:443")}, s501, s501, true},
}

// desyncResult is what one attack got on one path.
type desyncResult struct {
	statuses []int  // every response the attacker read, 1xx included
	closed   bool   // the connection ended after the answers
	victims  string // "" when every victim got its own file
}

func (r desyncResult) String() string {
	s := fmt.Sprint(r.statuses)
	if r.closed {
		s += " closed"
	}
	if r.victims != "" {
		s += " VICTIMS: " + r.victims
	}
	return s
}

// firstFinal is the first status ≥ 200 the attacker got, 0 if none.
func (r desyncResult) firstFinal() int {
	for _, s := range r.statuses {
		if s >= 200 {
			return s
		}
	}
	return 0
}

// attackOnce sends a's parts on a fresh connection to addr and reads every
// answer until the connection ends or stays quiet.
func attackOnce(addr string, a desyncAttack) desyncResult {
	var res desyncResult
	c, err := net.Dial("tcp", addr)
	if err != nil {
		res.victims = "dial: " + err.Error()
		return res
	}
	defer c.Close()
	for i, p := range a.raw {
		if i > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, p); err != nil {
			break // the server may have refused and closed already
		}
	}
	method := methodOf(a.raw[0])
	br := bufio.NewReader(c)
	wait := 10 * time.Second
	for {
		c.SetReadDeadline(time.Now().Add(wait))
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			res.closed = !isTimeoutErr(err)
			return res
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		res.statuses = append(res.statuses, resp.StatusCode)
		if err != nil {
			res.closed = !isTimeoutErr(err)
			return res
		}
		if resp.StatusCode >= 200 {
			// Anything more (a pipelined answer) comes promptly.
			wait = 500 * time.Millisecond
		}
	}
}

// victims fetches desyncVictimFiles, three per connection over sequential
// and then concurrent keep-alive connections, and describes every wrong
// answer ("" if none).
func victims(addr string, sums map[string]string) string {
	var mu sync.Mutex
	var bad []string
	one := func(k int) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			mu.Lock()
			bad = append(bad, err.Error())
			mu.Unlock()
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		for j := range 3 {
			u := desyncVictimFiles[(k+j)%len(desyncVictimFiles)]
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", u)
			resp, err := http.ReadResponse(br, nil)
			msg := ""
			if err != nil {
				msg = fmt.Sprintf("%s: %v", u, err)
			} else {
				h := sha256.New()
				n, _ := io.Copy(h, resp.Body)
				resp.Body.Close()
				if got := hex.EncodeToString(h.Sum(nil)); resp.StatusCode != 200 || got != sums[u] {
					msg = fmt.Sprintf("%s: status %d, %d bytes not its file", u, resp.StatusCode, n)
				}
			}
			if msg != "" {
				mu.Lock()
				bad = append(bad, msg)
				mu.Unlock()
				return
			}
		}
	}
	for k := range 3 {
		one(k)
	}
	var wg sync.WaitGroup
	for k := range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); one(3 + k) }()
	}
	wg.Wait()
	sort.Strings(bad)
	return strings.Join(bad, "; ")
}

// waitRelayIdle waits until no request is in relay, so that the attacker's
// node connection is back in the pool before the victims come.
func waitRelayIdle(s *Server) {
	for deadline := time.Now().Add(5 * time.Second); s.relaying.Load() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// desyncCluster starts one node and a front on mode's data path.
func desyncCluster(t *testing.T, mode string) (string, *Server, string, map[string]string) {
	t.Helper()
	var cfg Config
	pol := "lard" // content-aware: passfd nodes hand each connection back
	switch mode {
	case "relay":
		cfg.Path = Relay()
	case "passfd":
		cfg.Path = PassFD(PassFDConfig{})
	case "hybrid":
		// The sizes of passfdSite's files that matter here.
		sizes := map[string]int64{desyncTarget: 100 << 10, smuggledPath: 600 << 10, "/f5-1.bin": 300 << 10}
		cfg.Choose = Hybrid(PassFD(PassFDConfig{}))
		cfg.Hybrid = HybridConfig{CPUPercent: -1, ActiveConns: -1, MinSize: desyncHybridMin, Size: func(u string) int64 {
			if n, ok := sizes[u]; ok {
				return n
			}
			return -1
		}}
	}
	addr, s, cl, _, _, sums := passfdCluster(t, pol, 1, cfg)
	return addr, s, cl.Backends()[0].Addr, sums
}

func TestDesync(t *testing.T) {
	if len(desyncAttacks) < 20 {
		t.Fatalf("%d attack shapes, want at least 20", len(desyncAttacks))
	}
	results := map[string]map[string]desyncResult{}
	for _, mode := range []string{"relay", "passfd", "hybrid"} {
		t.Run(mode, func(t *testing.T) {
			addr, s, nodeAddr, sums := desyncCluster(t, mode)
			if msg := victims(addr, sums); msg != "" {
				t.Fatalf("before any attack: %s", msg)
			}
			for _, a := range desyncAttacks {
				res := attackOnce(addr, a)
				waitRelayIdle(s)
				res.victims = victims(addr, sums)
				if results[a.name] == nil {
					results[a.name] = map[string]desyncResult{}
				}
				results[a.name][mode] = res
				want := a.relay
				if mode == "passfd" {
					want = a.passfd
				}
				if !containsInt(want, res.firstFinal()) {
					t.Errorf("%s: attacker got %v, want first final status in %v", a.name, res, want)
				}
				if a.closed && !res.closed {
					t.Errorf("%s: connection left open after %v", a.name, res.statuses)
				}
				if res.victims != "" {
					t.Errorf("%s: victims got the wrong answers: %s", a.name, res.victims)
				}
			}
			if mode == "relay" {
				// The reference: the same bytes through HAProxy in front
				// of this node (not asserted: HAProxy is not under test).
				if testing.Short() {
					t.Logf("-short: no haproxy comparison")
				} else if bin, err := exec.LookPath("haproxy"); err != nil {
					t.Logf("haproxy not installed: no comparison")
				} else if hp := startHAProxy(t, bin, nodeAddr); hp != "" {
					for _, a := range desyncAttacks {
						res := attackOnce(hp, a)
						res.victims = victims(hp, sums)
						results[a.name]["haproxy"] = res
					}
				}
			}
		})
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-28s %-16s %-16s %-16s %s\n", "attack", "relay", "passfd", "hybrid", "haproxy 2.6 (relay)")
	differ := 0
	for _, a := range desyncAttacks {
		r := results[a.name]
		hp, ok := r["haproxy"]
		if ok && r["relay"].firstFinal() != hp.firstFinal() {
			differ++
		}
		fmt.Fprintf(&table, "%-28s %-16v %-16v %-16v %v\n", a.name, r["relay"], r["passfd"], r["hybrid"], hp)
	}
	t.Logf("statuses the attacker read; %d of %d first answers differ from HAProxy's:\n%s", differ, len(desyncAttacks), table.String())
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// startHAProxy runs haproxy in HTTP mode in front of nodeAddr with server
// connections shared between clients (http-reuse always), as a reference.
// It returns haproxy's address, or "" (logged) if it would not start.
func startHAProxy(t *testing.T, bin, nodeAddr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf(`global
	maxconn 1000
defaults
	mode http
	timeout connect 3s
	timeout client 10s
	timeout server 10s
	timeout http-request 5s
	option http-keep-alive
	http-reuse always
frontend fe
	bind %s
	default_backend be
backend be
	server n1 %s
`, addr, nodeAddr)
	dir := t.TempDir()
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-db", "-f", path)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Logf("haproxy: %v", err)
		return ""
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		} else if !errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
	}
	t.Logf("haproxy did not start: %s", stderr.String())
	return ""
}

// TestConnectionXFFKeepsClientAddress: a client that names X-Forwarded-For
// in Connection has its own X-Forwarded-For dropped (it asked for that),
// but the node still learns the client's address from the front's
// (main sent the node no X-Forwarded-For at all).
func TestConnectionXFFKeepsClientAddress(t *testing.T) {
	a := namedBackend(t, "A")
	addr, _, _ := startFront(t, Config{}, a.URL)
	c := dialFront(t, addr)
	for _, conn := range []string{"X-Forwarded-For", "keep-alive, x-forwarded-for"} {
		resp, _ := c.do("GET /h HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 6.6.6.6\r\nConnection: " + conn + "\r\nX-Forwarded-For: 7.7.7.7\r\n\r\n")
		if v := resp.Header.Get("X-Seen-X-Forwarded-For"); resp.StatusCode != 200 || v != "127.0.0.1" {
			t.Errorf("Connection: %s: status %d, node saw X-Forwarded-For %q, want 127.0.0.1", conn, resp.StatusCode, v)
		}
	}
}

// padHead returns a request head of exactly n bytes: the request line,
// lines, then "X-Pad" fields to fill. sep is what follows each field
// name (": " or ":").
func padHead(n int, requestLine string, lines []string, fields int, sep string) string {
	var b strings.Builder
	b.WriteString(requestLine + "\r\n")
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	for i := 0; i < fields; i++ {
		fmt.Fprintf(&b, "X-P%d%sv\r\n", i, sep)
	}
	rest := n - b.Len() - len("X-Pad"+sep+"\r\n\r\n")
	if rest < 0 {
		panic("padHead: too small")
	}
	b.WriteString("X-Pad" + sep + strings.Repeat("a", rest) + "\r\n\r\n")
	return b.String()
}

// TestNodeAcceptsWhatFrontAccepts: heads at the front's limits (8 KiB,
// 100 fields) are relayed to a real node with what the front adds
// (X-Forwarded-For, Host for HTTP/1.0, ": " for ":"), and the node serves
// them rather than answer 431. Just over the front's limits the
// front itself refuses.
func TestNodeAcceptsWhatFrontAccepts(t *testing.T) {
	addr, _, _, _, _, sums := passfdCluster(t, "wrr", 1, Config{Path: Relay()})
	const u = "/f0-0.bin"
	line11, line10 := "GET "+u+" HTTP/1.1", "GET "+u+" HTTP/1.0"
	cases := []struct {
		name string
		head string
		want int
	}{
		{"8 KiB head", padHead(8192, line11, []string{"Host: x"}, 0, ": "), 200},
		{"100 fields", padHead(2000, line11, []string{"Host: x"}, 98, ": "), 200},
		{"100 fields at 8 KiB, no space after colons", padHead(8192, line11, []string{"Host:x"}, 98, ":"), 200},
		{"HTTP/1.0 without Host at 8 KiB", padHead(8192, line10, []string{"Connection: keep-alive"}, 98, ":"), 200},
		{"8 KiB + 1", padHead(8193, line11, []string{"Host: x"}, 0, ": "), 431},
		{"101 fields", padHead(2000, line11, []string{"Host: x"}, 99, ": "), 431},
	}
	for _, c := range cases {
		if len(c.head) != 8192 && len(c.head) != 8193 && len(c.head) != 2000 {
			t.Fatalf("%s: head of %d bytes", c.name, len(c.head))
		}
		cl := dialFront(t, addr)
		resp, body := cl.do(c.head)
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.want)
			continue
		}
		if c.want == 200 && sum([]byte(body)) != sums[u] {
			t.Errorf("%s: wrong body", c.name)
		}
	}
}

// TestRelayRewriteTooLarge: a rewrite that would exceed what nodes accept
// (the front's limit plus httpwire.ForwardHeadroom) is refused by the front
// with 431: here an 8000-byte HTTP/1.0 head gets a Host naming a node
// address longer than the headroom.
func TestRelayRewriteTooLarge(t *testing.T) {
	long := "http://" + strings.Repeat("a", 1300) + ":80"
	addr, s, _ := startFront(t, Config{}, long)
	c := dialFront(t, addr)
	resp, _ := c.do(padHead(8000, "GET /x HTTP/1.0", nil, 0, ": "))
	if resp.StatusCode != 431 || !c.closed() {
		t.Fatalf("status %d, want 431 and close", resp.StatusCode)
	}
	if d := s.Stats().NodeDials; d != 0 {
		t.Fatalf("%d node dials; the request must not reach a node", d)
	}
}

// TestRelayResponseFramingRefused: a node answer whose Connection header
// names its own framing cannot be relayed faithfully (the front would have
// to drop the field it reads the body by): 502, and that node connection
// is closed. main relayed it without Content-Length.
func TestRelayResponseFramingRefused(t *testing.T) {
	for _, bad := range []string{
		"HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
	} {
		var conns atomic.Int64
		node := rawBackend(t, func(c net.Conn) {
			id := conns.Add(1)
			br := bufio.NewReader(c)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if req.URL.Path == "/bad" {
					io.WriteString(c, bad)
					continue
				}
				body := fmt.Sprintf("conn %d", id)
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			}
		})
		addr, _, _ := startFront(t, Config{}, node)
		c := dialFront(t, addr)
		resp, _ := c.do("GET /bad HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 502 {
			t.Errorf("%q: status %d, want 502", bad, resp.StatusCode)
			continue
		}
		resp, body := dialFront(t, addr).do(get("/good"))
		if resp.StatusCode != 200 || body != "conn 2" {
			t.Errorf("%q: next request got %d %q, want a fresh node connection (conn 2)", bad, resp.StatusCode, body)
		}
	}
}

// TestRelayNodeBytesOutOfTurn: bytes a node sends that no request asked for
// — after a body it framed shorter, on a HEAD or 204 answer, or later while
// the connection sits in the pool — are never read as another client's
// answer: the connection is closed, and the victim's request goes out on a
// fresh one. main answered the victim with the node's extra
// bytes when they arrived after the first answer.
func TestRelayNodeBytesOutOfTurn(t *testing.T) {
	const evil = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil"
	cases := []struct {
		name, method, first string
		later               bool // extra bytes sent after the answer was relayed
	}{
		{"after framed body, later", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst", true},
		{"after framed body, same write", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst", false},
		{"body on HEAD answer, later", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n", true},
		{"body on 204, later", "GET", "HTTP/1.1 204 No Content\r\n\r\n", true},
		{"unsolicited answer on idle connection", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			goOn, written := make(chan struct{}), make(chan struct{})
			node := reqBackend(t, func(c net.Conn, req *http.Request) bool {
				switch {
				case req.URL.Path != "/attack":
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				case !tc.later:
					io.WriteString(c, tc.first+evil)
					close(written)
				default:
					io.WriteString(c, tc.first)
					<-goOn
					io.WriteString(c, evil)
					close(written)
				}
				return true
			})
			addr, _, _ := startFront(t, Config{}, node)
			resp, _ := dialFront(t, addr).do(tc.method + " /attack HTTP/1.1\r\nHost: x\r\n\r\n")
			if want := tc.first[9:12]; resp.Status[:3] != want {
				t.Fatalf("attack answered %q, want the node's first answer (%s)", resp.Status, want)
			}
			if tc.later {
				close(goOn)
			}
			<-written
			time.Sleep(20 * time.Millisecond) // let loopback deliver the bytes
			resp, body := dialFront(t, addr).do(get("/victim"))
			if resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("victim got %d %q, want 200 \"ok\" from a fresh node connection", resp.StatusCode, body)
			}
		})
	}
}
