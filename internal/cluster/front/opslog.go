package front

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"shoal/internal/cluster/control"
)

// DefaultEventPeriod is how often LogEvents sums up the per-request trouble
// (retries, handoff fallbacks, queue refusals) in one line.
const DefaultEventPeriod = 10 * time.Second

// LogEvents writes the operational log an operator reads: each control-plane
// change (node up, down, added, removed, reweighted) once as it happens, a
// pick that had to ignore health (panic mode) at most once per period, and
// every period one line with the requests retried, handed off in vain
// (fallbacks to relay), refused by a full or slow queue, and the 5xx the
// front answered itself by reason (a limit, no node, …) — counts, never a
// line per request, so a bad minute cannot flood the log. stats reads the
// front's counters (Server.Stats, or the current server's after a reload);
// they are first read before LogEvents returns, and the summaries stop when
// ctx ends. every <= 0 means DefaultEventPeriod.
func LogEvents(ctx context.Context, cl *control.Cluster, stats func() Stats, log *slog.Logger, every time.Duration) {
	if every <= 0 {
		every = DefaultEventPeriod
	}
	var lastPanic atomic.Int64
	cl.OnChange(func(e control.Event) {
		switch e.Kind {
		case "up":
			log.Info("node up", "node", e.Node)
		case "down":
			log.Warn("node down", "node", e.Node)
		case "add":
			log.Info("node added", "node", e.Node)
		case "remove":
			log.Info("node removed", "node", e.Node)
		case "weight":
			log.Info("node weight changed", "node", e.Node)
		case "panic":
			now := time.Now().UnixNano()
			last := lastPanic.Load()
			if now-last >= int64(every) && lastPanic.CompareAndSwap(last, now) {
				log.Warn("no healthy node for a request: dispatching to nodes marked down (panic mode); logged once per period", "node", e.Node, "period", every)
			}
		}
	})
	prev := stats()
	go summarize(ctx, stats, log, every, prev)
}

func summarize(ctx context.Context, stats func() Stats, log *slog.Logger, every time.Duration, prev Stats) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur := stats()
		if attrs := eventDeltas(prev, cur); len(attrs) > 0 {
			log.Warn("requests in trouble in the last period", append(attrs, slog.Duration("period", every))...)
		}
		prev = cur
	}
}

// eventDeltas returns the non-zero increases between two snapshots of the
// counters that mean trouble, as log attributes.
func eventDeltas(a, b Stats) []any {
	var out []any
	add := func(name string, x, y uint64) {
		if y > x {
			out = append(out, slog.Uint64(name, y-x))
		}
	}
	add("retried", a.Retries, b.Retries)
	add("queue_timeouts", a.QueueTimeouts, b.QueueTimeouts)
	add("queue_full", a.QueueFull, b.QueueFull)
	add("front_5xx", a.Sent5xx, b.Sent5xx)
	// … and why, each 5xx reason by name (front_5xx_per_ip=…): the
	// client's errors (4xx) are not the operator's trouble.
	xa, xb := a.Answers.ByReason(), b.Answers.ByReason()
	for i := range xb {
		if xb[i].Class == 5 {
			add("front_5xx_"+xb[i].Reason, xa[i].N, xb[i].N)
		}
	}
	ha, hb := a.Handoff, b.Handoff
	add("fallback_no_socket", ha.FallbackNoSocket, hb.FallbackNoSocket)
	add("fallback_send", ha.FallbackSend, hb.FallbackSend)
	add("refused_socket_dir", ha.RefusedSocketDir, hb.RefusedSocketDir)
	add("refused_socket_peer", ha.RefusedSocketPeer, hb.RefusedSocketPeer)
	add("handback_refused", ha.ReturnRefused, hb.ReturnRefused)
	add("handoffs_lost", ha.Lost, hb.Lost)
	if ra, rb := a.Repair, b.Repair; ra != nil && rb != nil {
		add("repair_fallback_freeze", ra.FallbackFreeze, rb.FallbackFreeze)
		add("repair_fallback_node", ra.FallbackNode, rb.FallbackNode)
		add("repair_lost", ra.Lost, rb.Lost)
	}
	return out
}
