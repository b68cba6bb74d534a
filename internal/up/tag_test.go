package up

import (
	"bufio"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/admin"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/policy"
	"shoal/internal/tools/sim"
)

// tagConnRequests is how many consecutive trace requests share one
// keep-alive connection in the tag-mode replays.
const tagConnRequests = 10

// replayKeepAlive replays urls in order over conns concurrent keep-alive
// connections, each taking the next per consecutive requests (one chunk
// of the trace) and sending them one after the other, then closing, as
// the simulator's keep-alive connections do (sim.Config.ConnRequests). It
// returns how many answers were not 200.
func replayKeepAlive(t *testing.T, base string, urls []string, conns, per int) int64 {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var next atomic.Int64
	var bad atomic.Int64
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for {
				start := int(next.Add(int64(per))) - per
				if start >= len(urls) {
					return
				}
				if err := keepAliveChunk(u.Host, urls[start:min(start+per, len(urls))], &bad); err != nil {
					bad.Add(1)
					t.Log(err)
				}
			}
		})
	}
	wg.Wait()
	return bad.Load()
}

// keepAliveChunk sends targets on one connection, one after the other.
func keepAliveChunk(addr string, targets []string, bad *atomic.Int64) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for _, tg := range targets {
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, "GET "+tg+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			bad.Add(1)
		}
	}
	return nil
}

// TestTagMovesLiveVsSim replays the short parity trace (the first records of
// the NASA day) through `shoal up --path passfd --policy tbccrd` on keep-alive
// connections of 10 requests, 16 at a time, and through the simulator with
// the same connections (sim.Config.ConnRequests): the nodes move connections
// to each other by the table the front shares (tag mode), and the live
// moves per request — made by the nodes (TagStats.Moved) or, when a node
// asked, by the front (Rehomed) — must be within 10 % of the simulated ones.
func TestTagMovesLiveVsSim(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a trace through a live multi-process cluster; skipped with -short")
	}
	cfg, urls, acc := parityCluster(t, parityCase{Name: "nasa-small", Path: paritySmall}, "tbccrd")
	logs, err := os.CreateTemp(t.TempDir(), "nodes-*.log")
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	p, err := StartProcs(cfg, ProcsConfig{Path: "passfd", Exe: shoalBinary(t), Stderr: logs})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	waitSockets(t, p)
	start := time.Now()
	if bad := replayKeepAlive(t, p.URL, urls, 16, tagConnRequests); bad != 0 {
		t.Errorf("%d of %d requests failed", bad, len(urls))
	}
	took := time.Since(start)
	// The nodes' last notes reach the front within a few milliseconds.
	var st front.Stats
	for deadline := time.Now().Add(5 * time.Second); ; {
		st = p.Front.Stats()
		if st.Requests+st.Handoff.Tag.Served >= uint64(len(urls)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	tg := st.Handoff.Tag
	live := float64(tg.Moved+tg.Rehomed) / float64(len(urls))
	var names []string
	for _, n := range nodeInfos(t, p.Cluster) {
		names = append(names, n.URL)
	}
	res, err := sim.Run(sim.Config{Policy: "tbccrd", Nodes: 4, NodeNames: names, CacheBytes: 2 << 20, Cache: "gdsf",
		PerNode: 4, Path: sim.PathL7, ConnRequests: tagConnRequests, PolicyConfig: policy.Config{}}, sim.NewSliceSource(acc))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests in %v: live %.3f moves per request (%d by the nodes, %d through the front; front picked %d, "+
		"nodes routed %d, asked %d), sim %.3f; hit ratio sim %.3f", len(urls), took.Round(time.Millisecond), live,
		tg.Moved, tg.Rehomed, st.Requests, tg.Served, tg.Asked, res.MovesPerRequest, res.HitRatio)
	if res.MovesPerRequest == 0 || math.Abs(live-res.MovesPerRequest)/res.MovesPerRequest > 0.10 {
		t.Errorf("moves per request: live %.3f, simulated %.3f: more than 10 %% apart", live, res.MovesPerRequest)
	}
	if tg.Moved == 0 || tg.Served < uint64(len(urls))/2 {
		t.Errorf("the nodes moved %d connections and routed %d of %d requests; want most routed by the table", tg.Moved,
			tg.Served, len(urls))
	}
}

// TestRepairAcceptMovesLiveVsSim replays the short parity trace through
// `shoal up --path repair --policy tbccrd` with the nodes accepting new
// connections themselves (the front's steering program sends each SYN to a
// node by hash), on keep-alive connections of 10 requests, 16 at a time,
// and through the simulator's tag path, which places each connection's
// first request by layer-4 wrr as seed 000's front does: the moves per
// request the nodes report to the front must be within 15 % of the
// simulated ones, and nearly every connection of the replay must have been
// accepted by a node. 15, not the 10 % the passfd tag mode holds: the live
// count runs 2–8 % under the simulator's on a quiet machine and 11.5 % under
// in one CI run, where the nodes' tables and loads (pushed every 20–40 ms,
// reports every 20 ms) lag further and a tie keeps a connection where it is.
func TestRepairAcceptMovesLiveVsSim(t *testing.T) {
	needLab(t)
	cfg, urls, acc := parityCluster(t, parityCase{Name: "nasa-small", Path: paritySmall}, "tbccrd")
	cfg.HealthInterval, cfg.Admin = 200*time.Millisecond, "127.0.0.1:0" // the admin API on the front's lab address
	logs, err := os.Create(t.TempDir() + "/cluster.log")
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	r, err := StartRepair(cfg, RepairConfig{Exe: shoalBinary(t), Stderr: logs, NodesAccept: true})
	if err != nil {
		b, _ := os.ReadFile(logs.Name())
		t.Fatalf("%v\nlogs:\n%s", err, b)
	}
	defer r.Close()
	// The first connection goes through the front, which then opens the
	// nodes' channels and hands them the new connections.
	if bad := replayKeepAlive(t, r.URL, urls[:1], 1, 1); bad != 0 {
		t.Fatal("the first request failed")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(logs.Name())
		if strings.Contains(string(b), "nodes accepting new connections: [0 1 2 3]") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nodes never accepted new connections; logs:\n%s", b)
		}
	}
	before := frontStats(t, client, r.AdminURL, r.AdminToken).Repair
	if bad := replayKeepAlive(t, r.URL, urls, 16, tagConnRequests); bad != 0 {
		t.Errorf("%d of %d requests failed", bad, len(urls))
	}
	conns := (len(urls) + tagConnRequests - 1) / tagConnRequests
	var st *admin.RepairStats
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st = frontStats(t, client, r.AdminURL, r.AdminToken).Repair
		if st.Ended-before.Ended >= uint64(conns) || time.Now().After(deadline) {
			break // every connection's end reported, after its moves
		}
	}
	live := float64(st.MoveReports-before.MoveReports) / float64(len(urls))
	res, err := sim.Run(sim.Config{Policy: "tbccrd", Nodes: 4, CacheBytes: 2 << 20, Cache: "gdsf",
		PerNode: 4, Path: sim.PathTag, ConnRequests: tagConnRequests, PolicyConfig: policy.Config{}}, sim.NewSliceSource(acc))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests on %d connections: front handed over %d, nodes accepted %d; live %.3f moves per request, sim %.3f; hit ratio sim %.3f",
		len(urls), conns, st.Moved-before.Moved, st.Adopted-before.Adopted, live, res.MovesPerRequest, res.HitRatio)
	if st.Moved != before.Moved || st.Adopted-before.Adopted < uint64(conns)*9/10 {
		t.Errorf("front handed over %d connections, nodes reported accepting %d of %d", st.Moved-before.Moved,
			st.Adopted-before.Adopted, conns)
	}
	if res.MovesPerRequest == 0 || math.Abs(live-res.MovesPerRequest)/res.MovesPerRequest > 0.15 {
		t.Errorf("moves per request: live %.3f, simulated %.3f: more than 15 %% apart", live, res.MovesPerRequest)
	}
}

// TestHybridSharesTagWork runs the short parity trace through `shoal up
// --path hybrid --policy tbccrd` on 8 long keep-alive connections. Under
// the hybrid rule the front relays as many connections as keep its CPU
// below the threshold and the nodes move the others by the shared table
// (tag mode), handing connections back when the front says it has room.
// The front's CPU here includes the test's load, so the threshold is
// pinned out of reach both ways: at 1000 % the front wants every
// connection, and the nodes, which get some of them by the size rule
// (hand off large files) and move them, must hand them back; at 0.01 %
// it relays none (every request goes by the table).
func TestHybridSharesTagWork(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a trace through a live multi-process cluster; skipped with -short")
	}
	cfg, urls, _ := parityCluster(t, parityCase{Name: "nasa-small", Path: paritySmall}, "tbccrd")
	for _, cpu := range []float64{1000, 0.01} {
		p, err := StartProcs(cfg, ProcsConfig{Path: "hybrid", Exe: shoalBinary(t), hybridCPU: cpu})
		if err != nil {
			t.Fatal(err)
		}
		waitSockets(t, p)
		var h, last front.HandoffStats
		for round := range 4 {
			last = h
			if bad := replayKeepAlive(t, p.URL, urls, 8, len(urls)/8+1); bad != 0 {
				t.Errorf("threshold %g %%: %d of %d requests failed", cpu, bad, len(urls))
			}
			h = p.Front.Stats().Handoff
			t.Logf("threshold %g %%, round %d: the front relayed %d requests and handed off %d for CPU, %d for size; "+
				"nodes moved %d, served %d by the table, handed back %d; notes stale %d, refused %d", cpu, round, h.HybridRelay,
				h.HybridCPU, h.HybridSize, h.Tag.Moved, h.Tag.Served, h.Returned, h.Tag.Stale, h.Tag.Refused)
		}
		p.Close()
		// The last round, once the CPU samples have set the share.
		relayed, forCPU, forSize := h.HybridRelay-last.HybridRelay, h.HybridCPU-last.HybridCPU, h.HybridSize-last.HybridSize
		moved, served := h.Tag.Moved-last.Tag.Moved, h.Tag.Served-last.Tag.Served
		t.Logf("threshold %g %%, last round: relayed %d, handed off %d for CPU and %d for size, moved %d, served %d by the table, %d handed back",
			cpu, relayed, forCPU, forSize, moved, served, h.Returned-last.Returned)
		half := uint64(len(urls) / 2)
		if cpu > 100 {
			// Connections handed off for size come back instead of moving
			// (a node whose room ran out until the next sample moves a few:
			// 12–59 moves for 90–93 size handoffs in a round alone, 116 and
			// 316 for 89–92 under CI's load, where samples come late;
			// without the room the nodes made 13 moves per size handoff).
			if relayed < half || forCPU != 0 || forSize == 0 || moved >= 6*forSize {
				t.Errorf("threshold %g %%, last round: relayed %d of %d, handed off %d for CPU and %d for size, the nodes "+
					"moved %d; want most relayed, none for CPU, some for size and few moved", cpu, relayed, len(urls), forCPU,
					forSize, moved)
			}
			continue
		}
		if relayed != 0 || forCPU == 0 || moved == 0 || served < half {
			t.Errorf("threshold %g %%, last round: relayed %d, handed off %d for CPU, the nodes moved %d and served %d of %d; "+
				"want none relayed and most served by the table", cpu, relayed, forCPU, moved, served, len(urls))
		}
	}
}
