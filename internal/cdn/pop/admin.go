package pop

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/mbpp"
)

// PopsView is GET /pops: this PoP's MBPP view (seed 003 §2: the global
// performance view T every PoP holds).
type PopsView struct {
	Self    string            `json:"self"`
	ID      string            `json:"id"`
	Joined  bool              `json:"joined"`
	Members int               `json:"members"`
	Peers   []PeerJSON        `json:"pops"`
	Stats   mbpp.Stats        `json:"stats"`
	Wire    map[string]uint64 `json:"peerwire"`
}

// PeerJSON is one PoP of the view.
type PeerJSON struct {
	mbpp.PeerView
	IDHex string `json:"id_hex"`
}

// ChordView is GET /chord.
type ChordView struct {
	ID          string            `json:"id"`
	Addr        string            `json:"addr"`
	Predecessor *chord.Peer       `json:"predecessor"`
	Successors  []chord.Peer      `json:"successors"`
	Fingers     map[string]string `json:"fingers"` // finger index → node ID (distinct entries)
	Stats       chord.Stats       `json:"stats"`
}

// Pops returns the MBPP view.
func (p *PoP) Pops() PopsView {
	now := time.Now()
	p.mu.Lock()
	v := PopsView{Self: p.cfg.Name, ID: fmt.Sprintf("%016x", p.ID), Joined: p.mb.Joined(), Members: len(p.mb.Members()), Stats: p.mb.Stats()}
	for _, e := range p.mb.View(now) {
		v.Peers = append(v.Peers, PeerJSON{PeerView: e, IDHex: fmt.Sprintf("%016x", uint64(e.ID))})
	}
	p.mu.Unlock()
	s := p.wire.Stats
	v.Wire = map[string]uint64{"accepted": s.Accepted.Load(), "refused": s.Refused.Load(), "replays": s.Replays.Load(),
		"oversized": s.Oversized.Load(), "tampered": s.Tampered.Load(),
		"handshakes_refused": uint64(p.links.handshakesRefused.Load()), "links_refused": uint64(p.links.linksRefused.Load())}
	return v
}

// Chord returns the Chord state.
func (p *PoP) Chord() ChordView {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := ChordView{ID: fmt.Sprintf("%016x", p.ID), Addr: p.PeerAddr, Fingers: map[string]string{}}
	if p.ch == nil {
		return v
	}
	if pr, ok := p.ch.Predecessor(); ok {
		v.Predecessor = &pr
	}
	v.Successors = p.ch.Successors()
	fs := p.ch.Fingers()
	idx := make([]int, 0, len(fs))
	for i := range fs {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	last := chord.ID(0)
	for k, i := range idx {
		if k == 0 || fs[i].ID != last {
			v.Fingers[fmt.Sprint(i)] = fmt.Sprintf("%016x", uint64(fs[i].ID))
		}
		last = fs[i].ID
	}
	v.Stats = p.ch.Stats()
	return v
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func (p *PoP) servePops(w http.ResponseWriter, r *http.Request)  { writeJSON(w, p.Pops()) }
func (p *PoP) serveChord(w http.ResponseWriter, r *http.Request) { writeJSON(w, p.Chord()) }

// collector exports /pops and /chord in /metrics.
type collector struct{ p *PoP }

var (
	descAlive   = prometheus.NewDesc("shoal_pop_peer_alive", "1 if the PoP is alive in this PoP's MBPP view.", []string{"peer"}, nil)
	descRTT     = prometheus.NewDesc("shoal_pop_peer_rtt_seconds", "Smoothed link RTT to the PoP (TCP_INFO, learning factor A).", []string{"peer"}, nil)
	descServer  = prometheus.NewDesc("shoal_pop_peer_server_perf", "The PoP's server performance, 0..1.", []string{"peer"}, nil)
	descScore   = prometheus.NewDesc("shoal_pop_peer_score", "serv = L·perf_link + K·perf_server (seed 003 §2).", []string{"peer"}, nil)
	descAge     = prometheus.NewDesc("shoal_pop_peer_age_seconds", "Time since the PoP's entry last changed here.", []string{"peer"}, nil)
	descMBPP    = prometheus.NewDesc("shoal_pop_mbpp_events_total", "MBPP token events.", []string{"event"}, nil)
	descMembers = prometheus.NewDesc("shoal_pop_members", "Alive PoPs in this PoP's view.", nil, nil)
	descSuccs   = prometheus.NewDesc("shoal_pop_chord_successors", "Length of the Chord successor list.", nil, nil)
	descFingers = prometheus.NewDesc("shoal_pop_chord_fingers", "Distinct Chord fingers.", nil, nil)
	descHops    = prometheus.NewDesc("shoal_pop_chord_lookup_hops_total", "Chord lookup hops made by this PoP.", nil, nil)
	descWire    = prometheus.NewDesc("shoal_pop_peerwire_total", "Peer links and refused frames.", []string{"event"}, nil)
	descDNS     = prometheus.NewDesc("shoal_pop_dns_answers_total", "DNS answers by the PoP answered.", []string{"answer"}, nil)
	descContent = prometheus.NewDesc("shoal_pop_content_total", "Content tier events of this PoP: its nodes' hits, misses, revalidated and stale (served stale); origin_bytes; the miss chain's remote, shield and origin fetches; pushes, purges, evictions, registrations.", []string{"pop", "event"}, nil)
	descHeld    = prometheus.NewDesc("shoal_pop_content_held", "Content this PoP holds now: objects (keys its nodes hold), directory_keys (keys it is home for), purge_log (purges kept as tombstones).", []string{"pop", "what"}, nil)
	descDNSWhy  = prometheus.NewDesc("shoal_pop_dns_queries_total", "DNS queries by outcome: how a PoP was picked (coverage, balanced, fallback, score, overloaded, no_pop), else answer, nodata, nxdomain, servfail, refused, notimp, formerr, badvers; ecs and truncated count queries with a client subnet and UDP answers cut.", []string{"outcome"}, nil)
)

// gaugeCounts are the figures of cdnCounts that are levels, not counts.
var gaugeCounts = map[string]bool{"objects": true, "directory_keys": true, "purge_log": true}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAlive, descRTT, descServer, descScore, descAge, descMBPP, descMembers, descSuccs, descFingers, descHops, descWire, descDNS, descDNSWhy, descContent, descHeld} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	v := c.p.Pops()
	for _, e := range v.Peers {
		name := e.Name
		b := 0.0
		if e.Alive {
			b = 1
		}
		ch <- prometheus.MustNewConstMetric(descAlive, prometheus.GaugeValue, b, name)
		ch <- prometheus.MustNewConstMetric(descRTT, prometheus.GaugeValue, e.RTT.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(descServer, prometheus.GaugeValue, e.Server, name)
		ch <- prometheus.MustNewConstMetric(descScore, prometheus.GaugeValue, e.Score, name)
		ch <- prometheus.MustNewConstMetric(descAge, prometheus.GaugeValue, e.Age.Seconds(), name)
	}
	s := v.Stats
	for k, n := range map[string]uint64{"ping": s.PingsIn, "pong": s.PongsIn, "duplicate": s.Duplicates, "ping_regenerated": s.PingRegen,
		"pong_regenerated": s.PongRegen, "watchdog": s.WatchdogRegen, "declared_failed": s.Declared, "retransmit": s.Retransmits,
		"join_committed": s.JoinsCommitted, "join_refused": s.JoinsRefused, "rejoin": s.Rejoins} {
		ch <- prometheus.MustNewConstMetric(descMBPP, prometheus.CounterValue, float64(n), k)
	}
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(v.Members))
	cv := c.p.Chord()
	ch <- prometheus.MustNewConstMetric(descSuccs, prometheus.GaugeValue, float64(len(cv.Successors)))
	ch <- prometheus.MustNewConstMetric(descFingers, prometheus.GaugeValue, float64(len(cv.Fingers)))
	ch <- prometheus.MustNewConstMetric(descHops, prometheus.CounterValue, float64(cv.Stats.Hops))
	for k, n := range v.Wire {
		ch <- prometheus.MustNewConstMetric(descWire, prometheus.CounterValue, float64(n), k)
	}
	if c.p.cm != nil {
		for k, n := range c.p.cdnCounts() {
			if gaugeCounts[k] {
				ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(n), c.p.cfg.Name, k)
			} else {
				ch <- prometheus.MustNewConstMetric(descContent, prometheus.CounterValue, float64(n), c.p.cfg.Name, k)
			}
		}
	}
	if c.p.DNS != nil {
		st := c.p.DNS.Stats()
		for k, n := range st.ByPoP {
			ch <- prometheus.MustNewConstMetric(descDNS, prometheus.CounterValue, float64(n), k)
		}
		st.Outcomes["ecs"], st.Outcomes["truncated"] = st.ECS, st.Truncated
		for k, n := range st.Outcomes {
			ch <- prometheus.MustNewConstMetric(descDNSWhy, prometheus.CounterValue, float64(n), k)
		}
	}
}
