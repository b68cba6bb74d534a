package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"shoal/internal/cluster/front"
)

// Stats is the front's counters as GET /stats (and the dashboard) serve
// them: front.Stats with snake_case JSON keys, like the rest of the API and
// the Prometheus label values, and responses by status class labelled
// "1xx" … "5xx" instead of a bare array. The Go field names are front's, so
// a client in Go reads it as it would read front.Stats.
type Stats struct {
	ConnsAccepted uint64            `json:"conns_accepted"`   // client connections accepted
	ConnsActive   int64             `json:"conns_active"`     // client connections open now
	Requests      uint64            `json:"requests"`         // request heads parsed and dispatched or refused
	Retries       uint64            `json:"retries"`          // requests retried once on another node
	FreshRedials  uint64            `json:"fresh_redials"`    // stale pooled node connections replaced
	Sent4xx       uint64            `json:"sent_4xx"`         // 4xx answers the front generated itself
	Sent5xx       uint64            `json:"sent_5xx"`         // 5xx answers the front generated itself, limits' refusals included
	Answers       map[string]uint64 `json:"answers"`          // those answers by reason: "per_ip", "queue_full", "no_node", …
	Status        map[string]uint64 `json:"status"`           // responses to clients by class, "1xx" … "5xx"
	BytesIn       uint64            `json:"bytes_in"`         // bytes read from clients
	BytesOut      uint64            `json:"bytes_out"`        // bytes written to clients
	Queued        uint64            `json:"queued"`           // requests that waited in a node queue
	QueueTimeouts uint64            `json:"queue_timeouts"`   // 503s after waiting too long
	QueueFull     uint64            `json:"queue_full"`       // 503s because a node queue was full
	NodeDials     uint64            `json:"node_dials"`       // connections opened to nodes
	RefusedLimit  uint64            `json:"refused_limit"`    // client connections refused (503) at the global limit, none idle
	RefusedPerIP  uint64            `json:"refused_per_ip"`   // client connections refused (503) at the per-address limit
	IdleShed      uint64            `json:"idle_closed"`      // idle client connections closed near the global limit
	Streaming     int64             `json:"streaming"`        // response bodies streaming after giving back their node slot
	HeadBatches   uint64            `json:"head_batches"`     // batcher rounds
	HeadsBatched  uint64            `json:"heads_batched"`    // request heads written in those rounds
	HeadsPiped    uint64            `json:"heads_piped"`      // heads that went in another request's write (pipelining)
	Paths         map[string]uint64 `json:"paths"`            // requests per data path
	Handoff       HandoffStats      `json:"handoff"`          // handoff paths (passfd, hybrid)
	Repair        *RepairStats      `json:"repair,omitempty"` // the repair path; absent on others
	Protocols     ProtocolStats     `json:"protocols"`        // requests and connections by protocol, PROXY headers
}

// ProtocolStats is front.ProtocolStats keyed as the metrics label them:
// requests by protocol ("h1": HTTP/1.1 and 1.0, "h2", "h3"),
// connections that spoke HTTP/2 and HTTP/3, HTTP/2's refused streams,
// glitches and connection errors, and the PROXY headers read, refused from
// a trusted source, or refused from an untrusted one.
type ProtocolStats struct {
	Requests    map[string]uint64 `json:"requests"`
	Connections map[string]uint64 `json:"connections"`
	HTTP2       map[string]uint64 `json:"http2"`
	Proxy       map[string]uint64 `json:"proxy"`
}

// protocolStats converts the front's protocol counters.
func protocolStats(p front.ProtocolStats) ProtocolStats {
	return ProtocolStats{
		Requests:    map[string]uint64{"h1": p.H1Requests, "h2": p.H2Requests, "h3": p.H3Requests},
		Connections: map[string]uint64{"h2": p.H2Conns, "h3": p.H3Conns},
		HTTP2:       map[string]uint64{"refused_streams": p.H2Refused, "glitches": p.H2Glitches, "goaway_errors": p.H2Errors},
		Proxy:       map[string]uint64{"accepted": p.ProxyAccepted, "refused": p.ProxyRefused, "untrusted": p.ProxyUntrusted},
	}
}

// HandoffStats is front.HandoffStats with snake_case keys (see there for
// what each counts); the hybrid decisions are labelled by reason as in
// shoal_front_hybrid_decisions_total.
type HandoffStats struct {
	Passed           uint64 `json:"passed"`
	FallbackNoSocket uint64 `json:"fallback_no_socket"`
	FallbackSend     uint64 `json:"fallback_send"`
	Returned         uint64 `json:"returned"`
	ReturnRefused    uint64 `json:"return_refused"`
	Lost             uint64 `json:"lost"`
	Redispatched     uint64 `json:"redispatched"`
	Ended            uint64 `json:"ended"`
	// RefusedSocketDir and RefusedSocketPeer: relayed because the node's
	// handoff socket was outside handoff_dir or served by another user.
	RefusedSocketDir  uint64            `json:"refused_socket_dir"`
	RefusedSocketPeer uint64            `json:"refused_socket_peer"`
	FastPassed        uint64            `json:"fast_passed"`
	FastFallback      uint64            `json:"fast_fallback"`
	FastBlocked       uint64            `json:"fast_blocked"`
	Hybrid            map[string]uint64 `json:"hybrid"` // "cpu", "conns", "size", "relay"
	FrontCPUPercent   float64           `json:"front_cpu_percent"`

	// FallbackTLS: relayed because the client connection is TLS (no kTLS
	// to carry the session with the socket).
	FallbackTLS uint64 `json:"fallback_tls"`
	// FallbackStream: relayed because the request is an HTTP/2 or HTTP/3
	// stream, whose connection carries other streams; FallbackProxy:
	// because the client's address came in a PROXY header.
	FallbackStream uint64 `json:"fallback_stream"`
	FallbackProxy  uint64 `json:"fallback_proxy"`
	// Tag is tag mode's work: the nodes moving connections by the front's
	// shared table (front.TagStats).
	Tag TagStats `json:"tag"`
}

// TagStats is front.TagStats with snake_case keys.
type TagStats struct {
	Served  uint64 `json:"served"`
	Moved   uint64 `json:"moved"`
	Asked   uint64 `json:"asked"`
	Rehomed uint64 `json:"rehomed"`
	Notes   uint64 `json:"notes"`
	Stale   uint64 `json:"stale"`
	Refused uint64 `json:"refused"`
	Ended   uint64 `json:"ended"`
	Pushes  uint64 `json:"pushes"`
}

// RepairStats is front.RepairStats with the keys of
// shoal_front_repair_total's event label.
type RepairStats struct {
	Moved          uint64 `json:"moved"`
	Fast           uint64 `json:"moved_fast"`
	FallbackFreeze uint64 `json:"fallback_freeze"`
	FallbackNode   uint64 `json:"fallback_node"`
	Lost           uint64 `json:"lost"`
	Ended          uint64 `json:"ended"`
	Dropped        uint64 `json:"dropped"`
	Steered        int    `json:"steered"`
	Forged         uint64 `json:"refused_forged"`
	Replayed       uint64 `json:"refused_replayed"`
	Stale          uint64 `json:"refused_stale"`
	Malformed      uint64 `json:"refused_malformed"`
	// Early and Held: moves steered to a guarding node before the freeze,
	// and moves held at the front until the node acknowledged.
	Early uint64 `json:"steered_early"`
	Held  uint64 `json:"held"`
	// Retagged and StaleMoves: in tag mode, flows steered to a node that
	// took them over from another node, and such reports found stale.
	Retagged   uint64 `json:"moved_by_nodes"`
	StaleMoves uint64 `json:"moves_stale"`
	// Left: in tag mode, flows unsteered because their old holder reported
	// them left (their new holder died before reporting them).
	Left uint64 `json:"left"`
	// Adopted: connections the nodes accepted themselves and reported
	// (--repair-accept nodes); MoveReports: the node-to-node moves the
	// nodes reported in tag mode.
	Adopted     uint64 `json:"adopted"`
	MoveReports uint64 `json:"move_reports"`
}

// FrontStats converts the front's counters to the form /stats serves.
func FrontStats(st front.Stats) Stats {
	out := Stats{
		ConnsAccepted: st.ConnsAccepted, ConnsActive: st.ConnsActive, Requests: st.Requests, Retries: st.Retries,
		FreshRedials: st.FreshRedials, Sent4xx: st.Sent4xx, Sent5xx: st.Sent5xx, BytesIn: st.BytesIn, BytesOut: st.BytesOut,
		Queued: st.Queued, QueueTimeouts: st.QueueTimeouts, QueueFull: st.QueueFull, NodeDials: st.NodeDials,
		HeadBatches: st.HeadBatches, HeadsBatched: st.HeadsBatched, HeadsPiped: st.HeadsPiped,
		RefusedLimit: st.RefusedLimit, RefusedPerIP: st.RefusedPerIP, IdleShed: st.IdleShed, Streaming: st.Streaming,
		Status: make(map[string]uint64, 5), Paths: make(map[string]uint64, len(st.Paths)),
		Answers: map[string]uint64{},
	}
	for _, rc := range st.Answers.ByReason() {
		out.Answers[rc.Reason] = rc.N
	}
	for class := 1; class < len(st.Status); class++ {
		out.Status[strconv.Itoa(class)+"xx"] = st.Status[class]
	}
	for k, v := range st.Paths {
		out.Paths[k] = v
	}
	h := st.Handoff
	out.Handoff = HandoffStats{Passed: h.Passed, FallbackNoSocket: h.FallbackNoSocket, FallbackSend: h.FallbackSend,
		Returned: h.Returned, ReturnRefused: h.ReturnRefused, Lost: h.Lost, Redispatched: h.Redispatched, Ended: h.Ended,
		RefusedSocketDir: h.RefusedSocketDir, RefusedSocketPeer: h.RefusedSocketPeer, FallbackTLS: h.FallbackTLS,
		FallbackStream: h.FallbackStream, FallbackProxy: h.FallbackProxy,
		FastPassed: h.FastPassed, FastFallback: h.FastFallback, FastBlocked: h.FastBlocked,
		Hybrid:          map[string]uint64{"cpu": h.HybridCPU, "conns": h.HybridConns, "size": h.HybridSize, "relay": h.HybridRelay},
		FrontCPUPercent: h.FrontCPUPercent,
		Tag: TagStats{Served: h.Tag.Served, Moved: h.Tag.Moved, Asked: h.Tag.Asked, Rehomed: h.Tag.Rehomed, Notes: h.Tag.Notes,
			Stale: h.Tag.Stale, Refused: h.Tag.Refused, Ended: h.Tag.Ended, Pushes: h.Tag.Pushes}}
	out.Protocols = protocolStats(st.Protocols)
	if r := st.Repair; r != nil {
		out.Repair = &RepairStats{Moved: r.Moved, Fast: r.Fast, FallbackFreeze: r.FallbackFreeze, FallbackNode: r.FallbackNode,
			Lost: r.Lost, Ended: r.Ended, Dropped: r.Dropped, Steered: r.Steered,
			Forged: r.Forged, Replayed: r.Replayed, Stale: r.Stale, Malformed: r.Malformed,
			Early: r.Early, Held: r.Held, Retagged: r.Retagged, StaleMoves: r.StaleMoves, Left: r.Left,
			Adopted: r.Adopted, MoveReports: r.MoveReports}
	}
	return out
}

// decodeWeight reads the body of PUT /nodes/{i}/weight: {"weight": N}, or
// N alone (as `curl -d 5` sends it), N a whole number. Anything else, and
// anything after the value, is an error that says what is wanted; the
// cluster refuses a negative weight itself.
func decodeWeight(r *http.Request) (int, error) {
	const want = `want N or {"weight": N}`
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		return 0, fmt.Errorf("request body: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var num json.Number
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '{' {
		var body struct {
			Weight *json.Number `json:"weight"`
		}
		if err := dec.Decode(&body); err != nil {
			return 0, fmt.Errorf("request body: %w", err)
		}
		if body.Weight == nil {
			return 0, fmt.Errorf("request body: %s", want)
		}
		num = *body.Weight
	} else {
		var v any
		if err := dec.Decode(&v); err != nil {
			return 0, fmt.Errorf("request body: %s: %w", want, err)
		}
		var ok bool
		if num, ok = v.(json.Number); !ok {
			return 0, fmt.Errorf("request body: %s, not %s", want, b)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, fmt.Errorf("request body: something after the weight; %s", want)
	}
	n, err := strconv.Atoi(num.String())
	if err != nil {
		return 0, fmt.Errorf("request body: weight %s: want a whole number", num)
	}
	return n, nil
}
