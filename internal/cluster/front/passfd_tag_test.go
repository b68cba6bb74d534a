package front

import (
	"testing"
	"time"

	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/policy"
)

// tagTotals sums the nodes' listener counters.
func tagTotals(hls []*handoff.FDListener) (s handoff.FDListenerStats) {
	for _, hl := range hls {
		ls := hl.Stats()
		s.Received += ls.Received
		s.Returned += ls.Returned
		s.Moved += ls.Moved
		s.Rerouted += ls.Rerouted
		s.MoveLost += ls.MoveLost
		s.Refused += ls.Refused
		s.Dropped += ls.Dropped
		s.Ended += ls.Ended
	}
	return s
}

// tbccrdTables is the policy's connection table size and split.
func tbccrdTables(s *Server) policy.TBCCRDTables {
	var t policy.TBCCRDTables
	s.cl.WithPolicy(func(p policy.Policy, _ *policy.Cluster) { t = p.(*policy.TBCCRD).Tables(0).(policy.TBCCRDTables) })
	return t
}

// TestPassFDTagHammer: tbccrd over passfd in tag mode, 3 nodes, keep-alive
// connections of random URLs (1 KB to 1 MB, checksummed): the nodes move
// connections among themselves, the front passes each connection once and
// is asked only about URLs the table cannot tell, and when the clients have
// closed, the front's connection table and holds are empty again.
func TestPassFDTagHammer(t *testing.T) {
	total, conns := 4000, 40
	if testing.Short() {
		total, conns = 1000, 20
	}
	addr, s, cl, hls, all, sums := passfdCluster(t, "tbccrd", 3, Config{Path: PassFD(PassFDConfig{})})
	// Files above 500 KiB are never cached, so tbccrd places each request
	// for one by load (seed 000 §2.2.2 step 2): the table cannot tell, and
	// the nodes ask the front every time. TestPassFDTagPipelined has them.
	var urls []string
	for _, u := range all {
		if sizeOf(t, u) <= 300<<10 {
			urls = append(urls, u)
		}
	}
	hammer(t, addr, conns, total, urls, sums)
	ls := tagTotals(hls)
	h := waitHandoff(s, func(h HandoffStats) bool { return h.Tag.Moved >= ls.Moved })
	st := s.Stats()
	t.Logf("front: conns %d requests %d bytes out %d; handoff %+v; nodes %+v", st.ConnsAccepted, st.Requests, st.BytesOut, h, ls)
	if st.BytesOut != 0 || h.FallbackSend+h.FallbackNoSocket != 0 {
		t.Errorf("bytes out %d, fallbacks %+v", st.BytesOut, h)
	}
	if ls.Moved == 0 || h.Tag.Moved != ls.Moved || h.Tag.Served == 0 {
		t.Errorf("nodes moved %d, front heard of %d moves and %d served requests", ls.Moved, h.Tag.Moved, h.Tag.Served)
	}
	if ls.Dropped+ls.Refused+ls.Rerouted+ls.MoveLost+h.Tag.Refused != 0 {
		t.Errorf("node listeners %+v", ls)
	}
	// Every request is counted once: at the front (first requests and
	// asked ones) or in a note.
	if got := st.Requests + h.Tag.Served; got != uint64(total) {
		t.Errorf("front requests %d + served by the table %d = %d, want %d", st.Requests, h.Tag.Served, got, total)
	}
	// The front asked about a URL at most once per node, and was passed
	// each connection at most a few times.
	if h.Tag.Asked > uint64(3*len(urls)+conns) {
		t.Errorf("asked %d times for %d URLs on 3 nodes", h.Tag.Asked, len(urls))
	}
	// Connections close: the ends reach the front in notes.
	deadline := time.Now().Add(10 * time.Second)
	for {
		tb := tbccrdTables(s)
		var held int64
		for _, b := range cl.Backends() {
			held += b.Held.Load()
		}
		if tb.Conns == 0 && held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the clients closed: %d connections in tbccrd's table (%v), %d held", tb.Conns, tb.ConnsPerNode, held)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
