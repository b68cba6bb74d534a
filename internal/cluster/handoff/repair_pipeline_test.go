//go:build linux

package handoff

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Pipelining clients and large answers through `shoal front --path repair`.
// A client that writes ten requests at once hands the front a
// connection whose later segments may still be on the wire while the front
// freezes the socket and the node rebuilds it: each of them must reach the
// node (retransmitted if need be), never the frozen copy, and never meet a
// reset from a node that has no socket yet. Large answers must not stall on
// the client's ACKs either.

// pipelineResult is what the pipeline helper prints.
type pipelineResult struct {
	OK, Bad, Errors int
	Slowest         string `json:"slowest"` // the slowest connection (for the report; never asserted)
	FirstError      string `json:"first_error"`
}

// TestRepairPipelining: each client connection sends 10 GET requests in ONE
// write and must get all 10 answers, byte-exact (SHA-256), over the moved
// connection. "padded" requests carry a 7000-byte header each, so the write
// (~70 KB) spans ~50 segments and outgrows the front's first receive
// window: the later ones arrive while the connection moves;
// "small" ones fit in one segment. Answers are 1 KB to 1 MB. Both steering
// backends run: eBPF (which holds the flow while it moves) and nftables.
func TestRepairPipelining(t *testing.T) {
	conns := 64
	if testing.Short() {
		conns = 16
	}
	for _, backend := range []string{"bpf", "nftables"} {
		t.Run(backend, func(t *testing.T) {
			rc := startRepairClusterPath(t, 2, 8, "repair", "--repair-steer", backend)
			for _, c := range []struct {
				name string
				pad  int
			}{{"small", 0}, {"padded", 7000}} {
				t.Run(c.name, func(t *testing.T) {
					var out strings.Builder
					cl, _ := helper(t, rc.lab.ClientNS(), "pipeline", &out, rc.lab.VIP.String()+":80",
						strconv.Itoa(conns), rc.manPath, strconv.Itoa(c.pad))
					if err := cl.Wait(); err != nil {
						t.Fatalf("client: %v", err)
					}
					var r pipelineResult
					if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &r); err != nil {
						t.Fatalf("client output %q: %v", out.String(), err)
					}
					t.Logf("%d connections × 10 pipelined requests: %+v", conns, r)
					if r.OK != conns*10 || r.Bad != 0 || r.Errors != 0 {
						t.Errorf("%d of %d answers intact, %d corrupt, %d connections failed (first: %s)",
							r.OK, conns*10, r.Bad, r.Errors, r.FirstError)
					}
				})
			}
			rc.front.stop()
			m := rc.front.waitLog(regexp.MustCompile(`stats="\{Moved:(\d+) FallbackFreeze:(\d+) FallbackNode:(\d+) Lost:(\d+) .*Early:(\d+) Held:(\d+)`), 5*time.Second)
			if m == nil {
				t.Fatalf("front logged no repair stats:\n%s", rc.front.logText())
			}
			t.Logf("front: %s", m[0])
			if m[1] != strconv.Itoa(2*conns) || m[4] != "0" {
				t.Errorf("front moved %s connections (want %d), lost %s", m[1], 2*conns, m[4])
			}
			// The nodes guard their VIP (shoal node runs as root here), so
			// every flow is steered before the freeze and none is held:
			// no client ACK of an answer is dropped at the front.
			if m[5] != m[1] || m[6] != "0" {
				t.Errorf("front steered %s of %s moves early and held %s; want all early", m[5], m[1], m[6])
			}
		})
	}
}

// TestRepairLargeAnswers: one-request connections for 1 MB objects, each
// moved at its first request, with the default steering (eBPF, holding the
// flow while it moves). Every body must arrive intact.
func TestRepairLargeAnswers(t *testing.T) {
	reqs := 200
	if testing.Short() {
		reqs = 40
	}
	rc := startRepairClusterPath(t, 2, 16, "repair")
	var big strings.Builder
	for _, e := range rc.manifest {
		if e.size == 1<<20 {
			fmt.Fprintf(&big, "%s %d %s\n", e.path, e.size, e.sum)
		}
	}
	manPath := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(manPath, []byte(big.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := runFetch(t, rc.lab.ClientNS(), rc.base, "8", strconv.Itoa(reqs), manPath, "close")
	t.Logf("%d 1 MB answers in %v: %+v", reqs, time.Since(start).Round(time.Millisecond), r)
	if r.OK != reqs || r.Bad != 0 || r.Errors != 0 || r.Bytes != int64(reqs)<<20 {
		t.Errorf("Go client: %d ok of %d, %d corrupt, %d errors, %d bytes (first: %s)", r.OK, reqs, r.Bad, r.Errors, r.Bytes, r.FirstError)
	}
	rc.front.stop()
	m := rc.front.waitLog(regexp.MustCompile(`stats="\{Moved:(\d+) .*Lost:(\d+)`), 5*time.Second)
	if m == nil {
		t.Fatalf("front logged no repair stats:\n%s", rc.front.logText())
	}
	t.Logf("front: %s", m[0])
	if m[1] != strconv.Itoa(reqs) || m[2] != "0" {
		t.Errorf("front moved %s of %d connections, lost %s", m[1], reqs, m[2])
	}
}

// helperPipeline is the pipelining client: conns connections at once, each
// writing 10 requests (files k*10+j of the manifest, each with a header of
// pad bytes) in ONE write, then reading the 10 answers and checking their
// bytes. It prints one JSON line.
func helperPipeline(args []string) error {
	addr := args[0]
	conns, _ := strconv.Atoi(args[1])
	man, err := readManifest(args[2])
	if err != nil {
		return err
	}
	pad, _ := strconv.Atoi(args[3])
	fmt.Println("READY")
	var ok, bad, errs atomic.Int64
	var firstErr atomic.Value
	var mu sync.Mutex
	var slowest time.Duration
	var wg sync.WaitGroup
	for k := range conns {
		wg.Go(func() {
			fail := func(format string, a ...any) {
				errs.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Sprintf("conn %d: ", k)+fmt.Sprintf(format, a...))
			}
			t0 := time.Now()
			c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
			if err != nil {
				fail("dial: %v", err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			var reqs strings.Builder
			var want []manifestEntry
			for j := range 10 {
				e := man[(k*10+j)%len(man)]
				want = append(want, e)
				fmt.Fprintf(&reqs, "GET %s HTTP/1.1\r\nHost: vip\r\n", e.path)
				if pad > 0 {
					fmt.Fprintf(&reqs, "X-Pad: %s\r\n", strings.Repeat("p", pad))
				}
				reqs.WriteString("\r\n")
			}
			if n, err := c.Write([]byte(reqs.String())); err != nil {
				fail("write (%d of %d bytes): %v", n, reqs.Len(), pipelineErr(err))
				return
			}
			r := bufio.NewReaderSize(c, 64<<10)
			h := sha256.New()
			for j, e := range want {
				resp, err := http.ReadResponse(r, nil)
				if err != nil {
					fail("answer %d (%s): %v", j, e.path, pipelineErr(err))
					return
				}
				h.Reset()
				n, err := io.Copy(h, resp.Body)
				resp.Body.Close()
				if err != nil {
					fail("answer %d (%s) body after %d bytes: %v", j, e.path, n, pipelineErr(err))
					return
				}
				if resp.StatusCode != 200 || int(n) != e.size || hex.EncodeToString(h.Sum(nil)) != e.sum {
					bad.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("conn %d answer %d %s: status %d, %d bytes, checksum mismatch", k, j, e.path, resp.StatusCode, n))
					continue
				}
				ok.Add(1)
			}
			mu.Lock()
			slowest = max(slowest, time.Since(t0))
			mu.Unlock()
		})
	}
	wg.Wait()
	fe, _ := firstErr.Load().(string)
	b, _ := json.Marshal(map[string]any{"ok": ok.Load(), "bad": bad.Load(), "errors": errs.Load(),
		"slowest": slowest.Round(time.Millisecond).String(), "first_error": fe})
	fmt.Println(string(b))
	return nil
}

// pipelineErr names a reset plainly: it is the failure this test is about.
func pipelineErr(err error) error {
	if errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("connection reset (%w)", err)
	}
	return err
}
