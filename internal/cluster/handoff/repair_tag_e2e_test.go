//go:build linux

package handoff

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// End-to-end tests of tag mode across hosts (repair_tagmsg.go): `shoal
// front --path repair --policy tbccrd` hands connections over in tag mode
// and the nodes move them among themselves with TCP_REPAIR.

// tagStats is what a stopped front and its nodes logged about tag mode.
type tagStats struct {
	moved, lost, ended, dropped, steered, retagged, staleMoves, left, adopted int
	movedOut, moveFailed, moveLost, accepted                                  int
}

// stopTagCluster stops the front and the nodes and reads their counters.
func stopTagCluster(t *testing.T, rc *repairCluster) tagStats {
	t.Helper()
	time.Sleep(300 * time.Millisecond) // the last FIN-HANDOFF notices
	rc.front.stop()
	re := regexp.MustCompile(`stats="\{Moved:(\d+) FallbackFreeze:\d+ FallbackNode:\d+ Lost:(\d+) Ended:(\d+) Dropped:(\d+) Steered:(\d+) .*Retagged:(\d+) StaleMoves:(\d+)(?: Left:(\d+))?(?: Adopted:(\d+))?`)
	m := rc.front.waitLog(re, 5*time.Second)
	if m == nil {
		t.Fatalf("front logged no repair stats:\n%s", rc.front.logText())
	}
	t.Logf("front: %s", m[0])
	var s tagStats
	s.moved, _ = strconv.Atoi(m[1])
	s.lost, _ = strconv.Atoi(m[2])
	s.ended, _ = strconv.Atoi(m[3])
	s.dropped, _ = strconv.Atoi(m[4])
	s.steered, _ = strconv.Atoi(m[5])
	s.retagged, _ = strconv.Atoi(m[6])
	s.staleMoves, _ = strconv.Atoi(m[7])
	s.left, _ = strconv.Atoi(m[8])
	s.adopted, _ = strconv.Atoi(m[9])
	nre := regexp.MustCompile(`moved_out=(\d+) move_failed=(\d+) move_lost=(\d+)`)
	for i, n := range rc.nodes {
		n.stop()
		nm := n.waitLog(nre, 5*time.Second)
		if nm == nil && n.cmd.ProcessState != nil && !n.cmd.ProcessState.Success() && n.cmd.ProcessState.ExitCode() == -1 {
			continue // killed by the test
		}
		if nm == nil {
			t.Fatalf("node %d logged no counters:\n%s", i, n.logText())
		}
		a, _ := strconv.Atoi(nm[1])
		b, _ := strconv.Atoi(nm[2])
		c, _ := strconv.Atoi(nm[3])
		s.movedOut, s.moveFailed, s.moveLost = s.movedOut+a, s.moveFailed+b, s.moveLost+c
		if am := regexp.MustCompile(`accepted=(\d+)`).FindStringSubmatch(n.logText()); am != nil {
			d, _ := strconv.Atoi(am[1])
			s.accepted += d
		}
	}
	rc.lab.Down(t.Context())
	return s
}

// TestRepairTagKeepAlive: keep-alive connections of many requests under
// tbccrd; the nodes move connections among themselves, every body arrives
// intact on the one connection each client opened, the front's steering
// followed every move (no flow left steered, every connection's end seen)
// and no move was lost.
func TestRepairTagKeepAlive(t *testing.T) {
	conns, reqs := 24, 2400
	if testing.Short() {
		conns, reqs = 8, 400
	}
	rc := startRepairClusterPath(t, 3, 48, "repair", "--policy", "tbccrd")
	r := runFetch(t, rc.lab.ClientNS(), rc.base, strconv.Itoa(conns), strconv.Itoa(reqs), rc.manPath)
	t.Logf("Go client: %+v", r)
	if r.OK != reqs || r.Bad != 0 || r.Errors != 0 || r.Dials != conns {
		t.Errorf("Go client: %d ok of %d, %d corrupt, %d errors, %d dials for %d connections (first: %s)",
			r.OK, reqs, r.Bad, r.Errors, r.Dials, conns, r.FirstError)
	}
	s := stopTagCluster(t, rc)
	t.Logf("tag: %+v", s)
	// A report that arrives after the next move's (two moves in quick
	// succession) is stale: the flow is already where the later one says.
	if s.movedOut == 0 || s.retagged+s.staleMoves != s.movedOut {
		t.Errorf("nodes moved %d connections, the front applied %d of those moves and found %d stale: want some, all accounted",
			s.movedOut, s.retagged, s.staleMoves)
	}
	if s.lost != 0 || s.moveLost != 0 || s.ended != s.moved || s.steered != 0 {
		t.Errorf("front lost %d, nodes lost %d moves; %d ends for %d connections, %d flows still steered", s.lost, s.moveLost, s.ended, s.moved, s.steered)
	}
}

// TestRepairTagNodesAccept: with --repair-accept nodes the front's
// steering program sends each new connection's SYN straight to a node,
// which accepts it on the VIP, reports it and moves it by the table like
// any other. After a warm-up (the front hands the first connections over
// until the nodes' channels are up), no connection passes through the
// front: every body arrives intact, the nodes accepted every connection
// of the run, the front adopted each from the nodes' reports, and no flow
// stays steered once the clients are done.
func TestRepairTagNodesAccept(t *testing.T) {
	conns, reqs := 24, 2400
	if testing.Short() {
		conns, reqs = 8, 400
	}
	rc := startRepairClusterPath(t, 3, 48, "repair", "--policy", "tbccrd", "--repair-accept", "nodes", "--admin", tagAdmin)
	warm := runFetch(t, rc.lab.ClientNS(), rc.base, "4", "96", rc.manPath)
	if warm.OK != 96 {
		t.Fatalf("warm-up: %+v", warm)
	}
	if rc.front.waitLog(regexp.MustCompile(`nodes accepting new connections: \[0 1 2\]`), 5*time.Second) == nil {
		t.Fatalf("the front never sent new connections to the nodes:\n%s", rc.front.logText())
	}
	r := runFetch(t, rc.lab.ClientNS(), rc.base, strconv.Itoa(conns), strconv.Itoa(reqs), rc.manPath)
	t.Logf("Go client: %+v", r)
	if r.OK != reqs || r.Bad != 0 || r.Errors != 0 || r.Dials != conns {
		t.Errorf("Go client: %d ok of %d, %d corrupt, %d errors, %d dials for %d connections (first: %s)",
			r.OK, reqs, r.Bad, r.Errors, r.Dials, conns, r.FirstError)
	}
	left := waitSteered(t, rc, 10*time.Second)
	s := stopTagCluster(t, rc)
	t.Logf("tag: %+v", s)
	if s.moved > warm.Dials || s.accepted < conns || s.adopted < conns {
		t.Errorf("front handed over %d connections (warm-up: %d); nodes accepted %d, front adopted %d; want all %d of the run accepted and adopted",
			s.moved, warm.Dials, s.accepted, s.adopted, conns)
	}
	if s.movedOut == 0 || s.lost != 0 || s.moveLost != 0 || left != 0 || s.steered != 0 {
		t.Errorf("nodes moved %d connections, lost %d (front %d); %d flows steered after the clients were done, %d at stop",
			s.movedOut, s.moveLost, s.lost, left, s.steered)
	}
}

// TestRepairTagPipelined: each connection sends ten requests in one write,
// for files of 1 KB to 1 MB that the table spreads over the nodes, so a
// connection moves while the answers before the move are still being sent
// (the holder waits for them) and carries the requests after it to the new
// node; every answer must arrive, intact and in order.
func TestRepairTagPipelined(t *testing.T) {
	for _, accept := range []string{"front", "nodes"} {
		t.Run("accept="+accept, func(t *testing.T) { testRepairTagPipelined(t, accept) })
	}
}

// testRepairTagPipelined is TestRepairTagPipelined with new connections
// accepted by accept (--repair-accept): with nodes, the connection's
// first requests reach a node that accepted it, which may move it at once.
func testRepairTagPipelined(t *testing.T, accept string) {
	rc := startRepairClusterPath(t, 3, 24, "repair", "--policy", "tbccrd", "--repair-accept", accept)
	// Warm the table: each file served once, so that its entry names one
	// node.
	if r := runFetch(t, rc.lab.ClientNS(), rc.base, "4", "48", rc.manPath); r.OK != 48 {
		t.Fatalf("warm-up: %+v", r)
	}
	if accept == "nodes" && rc.front.waitLog(regexp.MustCompile(`nodes accepting new connections: \[0 1 2\]`), 5*time.Second) == nil {
		t.Fatalf("the front never sent new connections to the nodes:\n%s", rc.front.logText())
	}
	time.Sleep(50 * time.Millisecond) // the table's push
	var out strings.Builder
	cl, _ := helper(t, rc.lab.ClientNS(), "pipeline", &out, rc.lab.VIP.String()+":80", "12", rc.manPath, "0")
	if err := cl.Wait(); err != nil {
		t.Fatalf("pipeline client: %v", err)
	}
	var res struct {
		OK, Bad, Errors int
		First           string `json:"first_error"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &res); err != nil {
		t.Fatalf("pipeline client output %q: %v", out.String(), err)
	}
	t.Logf("pipelined: %+v", res)
	if res.OK != 120 || res.Bad != 0 || res.Errors != 0 {
		t.Errorf("pipelined: %d of 120 answers ok, %d corrupt, %d errors (first: %s)", res.OK, res.Bad, res.Errors, res.First)
	}
	s := stopTagCluster(t, rc)
	t.Logf("tag: %+v", s)
	if s.movedOut == 0 || s.moveLost != 0 || s.lost != 0 || s.steered != 0 {
		t.Errorf("moves %d, lost %d (front %d), %d flows still steered", s.movedOut, s.moveLost, s.lost, s.steered)
	}
	if accept == "nodes" && s.accepted < 12 {
		t.Errorf("nodes accepted %d of the 12 pipelining connections", s.accepted)
	}
}

// TestRepairTagPeerUnreachable: node 1 cannot reach node 2's handoff port
// (refused, as for a node whose process died), while the front can. Every
// move node 1 tries fails before anything was sent: it thaws the socket and
// serves the request itself, so no request is lost, while node 2 still moves
// connections to node 1.
func TestRepairTagPeerUnreachable(t *testing.T) {
	rc := startRepairClusterPath(t, 2, 16, "repair", "--policy", "tbccrd")
	script := fmt.Sprintf("table inet shoaltest {\n chain in {\n type filter hook input priority 0;\n ip saddr %s tcp dport 7070 reject with tcp reset\n }\n}\n",
		rc.lab.NodeAddrs[0])
	cmd := Exec(t.Context(), rc.lab.NodeNS(1), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("nft in the node's namespace: %v: %s", err, out)
	}
	r := runFetch(t, rc.lab.ClientNS(), rc.base, "4", "400", rc.manPath)
	t.Logf("Go client: %+v", r)
	if r.OK != 400 || r.Bad != 0 || r.Errors != 0 || r.Dials != 4 {
		t.Errorf("Go client: %d ok of 400, %d corrupt, %d errors, %d dials (first: %s)", r.OK, r.Bad, r.Errors, r.Dials, r.FirstError)
	}
	s := stopTagCluster(t, rc)
	t.Logf("tag: %+v", s)
	if s.moveFailed == 0 || s.moveLost != 0 || s.lost != 0 || s.steered != 0 {
		t.Errorf("failed moves %d (want some), lost moves %d (front %d), %d flows still steered", s.moveFailed, s.moveLost, s.lost, s.steered)
	}
}

// TestRepairTagNodeKilled: a node's process is killed while the nodes move
// connections among themselves under load. Its clients' connections end
// (reset or end of file): moves towards it fail before the state left (the
// socket is thawed and served where it is) or, when its channel broke with
// the state on it, end in a reset from the old holder; no client may wait
// until its timeout, and the other nodes keep serving (at least half of
// the requests after the kill answered, none corrupt).
// Once the clients are done, no flow may stay in the front's flow map: the
// ones whose last move report died with the node (still in its batch) are
// ended by their old holder's MsgFlowLeft.
//
// vanish-accept=nodes: the nodes accept new connections, and node 2's host
// vanishes (its link goes down: no reset from its kernel, as when a host
// loses power). Once the front's channel to it breaks, its flows go to the
// front's own stack for a while, whose resets end them; their slot's node
// would drop their segments (its guard) and leave the clients waiting.
func TestRepairTagNodeKilled(t *testing.T) {
	t.Run("kill-accept=front", func(t *testing.T) { testRepairTagNodeKilled(t, "front", false) })
	t.Run("vanish-accept=nodes", func(t *testing.T) { testRepairTagNodeKilled(t, "nodes", true) })
}

// testRepairTagNodeKilled is TestRepairTagNodeKilled with new connections
// accepted by accept (--repair-accept), node 2 killed or, with vanish, cut
// off.
func testRepairTagNodeKilled(t *testing.T, accept string, vanish bool) {
	rc := startRepairClusterPath(t, 3, 24, "repair", "--policy", "tbccrd", "--admin", tagAdmin, "--repair-accept", accept)
	if r := runFetch(t, rc.lab.ClientNS(), rc.base, "4", "96", rc.manPath); r.OK != 96 {
		t.Fatalf("warm-up: %+v", r)
	}
	if accept == "nodes" && rc.front.waitLog(regexp.MustCompile(`nodes accepting new connections: \[0 1 2\]`), 5*time.Second) == nil {
		t.Fatalf("the front never sent new connections to the nodes:\n%s", rc.front.logText())
	}
	var out strings.Builder
	cl, _ := helper(t, rc.lab.ClientNS(), "fetch", &out, rc.base, "8", "3000", rc.manPath)
	time.Sleep(300 * time.Millisecond)
	if vanish {
		if out, err := Exec(t.Context(), rc.lab.NodeNS(2), "ip", "link", "set", "eth0", "down").CombinedOutput(); err != nil {
			t.Fatalf("cutting node 2 off: %v: %s", err, out)
		}
	} else {
		rc.nodes[2].cmd.Process.Kill()
		rc.nodes[2].cmd.Wait()
	}
	start := time.Now()
	if err := cl.Wait(); err != nil {
		t.Fatalf("Go client: %v", err)
	}
	var r fetchResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &r); err != nil {
		t.Fatalf("Go client output %q: %v", out.String(), err)
	}
	t.Logf("after the kill: %+v in %v", r, time.Since(start).Round(time.Millisecond))
	hung := 0
	for why, n := range r.ReadErrors {
		if strings.Contains(why, "timeout") {
			hung += n
		}
	}
	if hung > 0 {
		t.Errorf("%d connections hung until the client's timeout", hung)
	}
	if r.OK < 3000/2 || r.Bad != 0 {
		t.Errorf("%d of 3000 requests answered (%d corrupt) after one of three nodes died", r.OK, r.Bad)
	}
	left := waitSteered(t, rc, 20*time.Second)
	s := stopTagCluster(t, rc)
	t.Logf("tag: %+v", s)
	if left != 0 || s.steered != 0 {
		t.Errorf("%d flows still steered %v after the clients were done (%d at stop): nothing ended them",
			left, 20*time.Second, s.steered)
	}
	t.Logf("%d connections moved by the front: %d ended on a node, %d dropped with the node, %d left by their old holder",
		s.moved, s.ended, s.dropped, s.left)
}

// tagAdmin is the front's admin address (in its namespace) in tests that
// watch its flow map.
const tagAdmin = "127.0.0.1:9901"

// waitSteered polls the front's /stats until no flow is steered or limit
// passes, and returns the last count seen (-1 if none could be read).
func waitSteered(t *testing.T, rc *repairCluster, limit time.Duration) int {
	t.Helper()
	n := -1
	for deadline := time.Now().Add(limit); ; time.Sleep(200 * time.Millisecond) {
		out, err := Exec(t.Context(), rc.lab.FrontNS(), "curl", "-sf", "http://"+tagAdmin+"/stats").Output()
		var st struct {
			Repair *struct{ Steered int } `json:"repair"`
		}
		if err == nil && json.Unmarshal(out, &st) == nil && st.Repair != nil {
			n = st.Repair.Steered
		}
		if n == 0 || time.Now().After(deadline) {
			return n
		}
	}
}
