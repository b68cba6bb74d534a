package pop

import (
	"errors"
	"sync/atomic"
)

// errNoOrigin is a miss with no origin configured for it.
var errNoOrigin = errors.New("no origin configured")

// Counters count a PoP's content work across PoPs (GET /content,
// /metrics, the dashboard). What the nodes count themselves (hits, misses,
// revalidations, stale served) is added from their stores.
type Counters struct {
	// The miss chain: misses that reached it, and where they were served
	// from; OriginBytes are the body bytes the origin sent.
	Fetches, RemoteFetches, ShieldFetches, OriginFetches atomic.Uint64
	OriginBytes, OriginErrors, PeerErrors, Tombstoned    atomic.Uint64
	// PeerBytes are the body bytes other PoPs sent for this PoP's misses
	// (holders' copies and shields' answers): the content traffic between
	// PoPs, which the simulator's peer_bytes models.
	PeerBytes atomic.Uint64
	// ShieldServed counts misses of other PoPs this PoP fetched as the
	// key's home; Redirects the clients sent to a better PoP.
	ShieldServed, Redirects atomic.Uint64
	// The content manager: copies stored and evicted, pushes, purges, and
	// the directory's upkeep.
	Stored, Evictions, PushesSent, PushesReceived    atomic.Uint64
	Purges, PurgedObjects, Registrations, HandedOver atomic.Uint64
	Syncs                                            atomic.Uint64
	// HomeQueryFailures counts directory queries to a key's home that got
	// no answer within queryTimeout (each cost its miss that wait).
	HomeQueryFailures atomic.Uint64
}

// Map is the counters by name, as /content and /metrics show them.
func (c *Counters) Map() map[string]uint64 {
	return map[string]uint64{
		"fetches": c.Fetches.Load(), "remote_fetches": c.RemoteFetches.Load(), "shield_fetches": c.ShieldFetches.Load(),
		"origin_fetches": c.OriginFetches.Load(), "origin_bytes": c.OriginBytes.Load(), "origin_errors": c.OriginErrors.Load(),
		"peer_errors": c.PeerErrors.Load(), "tombstoned": c.Tombstoned.Load(), "shield_served": c.ShieldServed.Load(), "peer_bytes": c.PeerBytes.Load(),
		"redirects": c.Redirects.Load(), "stored": c.Stored.Load(), "evictions": c.Evictions.Load(),
		"pushes_sent": c.PushesSent.Load(), "pushes_received": c.PushesReceived.Load(), "purges": c.Purges.Load(),
		"purged_objects": c.PurgedObjects.Load(), "registrations": c.Registrations.Load(), "handed_over": c.HandedOver.Load(),
		"purge_syncs": c.Syncs.Load(), "home_query_failures": c.HomeQueryFailures.Load(),
	}
}
