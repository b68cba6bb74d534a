package front

// RepairStats counts the repair path's work.
type RepairStats struct {
	// Moved counts connections rebuilt on a node.
	Moved uint64
	// FallbackFreeze counts requests relayed because the socket could not
	// be frozen (e.g. the client had already half-closed);
	// FallbackNode those relayed because the node refused cleanly or could
	// not be reached before anything was sent.
	FallbackFreeze, FallbackNode uint64
	// Lost counts connections whose handoff outcome was unknown (no
	// answer): the front dropped them silently and the client gets a
	// reset on its next packet.
	Lost uint64
	// Ended counts FIN-HANDOFF notices; Dropped flows removed because their
	// node's control channel broke; Steered the flows steered now.
	Ended, Dropped uint64
	Steered        int
	// Refused counts control frames refused as forged, replayed, stale or
	// malformed.
	Forged, Replayed, Stale, Malformed uint64
	// Early counts moves whose flow was steered to the node before the
	// socket was frozen (the node guards its virtual IP, or nftables
	// steering); Held, moves whose flow was held until the node's
	// acknowledgement (handoff.RepairMover explains both).
	Early, Held uint64
	// Fast counts the moved connections handed off straight from the raw
	// accept loop (repairfast.go).
	Fast uint64
	// Retagged counts flows steered from one node to another at a node's
	// report in tag mode (repair_tag.go); StaleMoves, reports refused as
	// older than a move already applied or for a flow not moved.
	Retagged, StaleMoves uint64
	// Left counts flows unsteered in tag mode because their old holder
	// reported them left and no later move came (the node they moved to
	// died before it reported them; handoff's repair_left.go).
	Left uint64
	// Adopted counts connections nodes accepted themselves and reported
	// (RepairConfig.NodesAccept), whose flows the front then steers;
	// MoveReports, the node-to-node moves nodes reported in tag mode.
	Adopted, MoveReports uint64
}
