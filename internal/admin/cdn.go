package admin

// CDN is the content tier's part of GET /dashboard.json when the admin API
// serves a PoP (`shoal pop`, `shoal up --pops`): what this PoP's caches
// did and the PoPs it sees. An operator reads the PoP's hit ratio, its
// revalidations and stale answers, and how much it took from the origin
// against how much from other PoPs (SPEC §5).
type CDN struct {
	// PoP is this PoP's name.
	PoP string `json:"pop"`
	// Counts are cumulative: hits, misses, revalidated, stale (served
	// stale), origin_bytes, and the miss chain's remote_fetches,
	// shield_fetches, origin_fetches, purges and the rest of
	// GET /content's counters.
	Counts map[string]uint64 `json:"counts"`
	// PoPs is every PoP in this PoP's MBPP view, itself included.
	PoPs []CDNPoP `json:"pops"`
}

// CDNPoP is one PoP of the view.
type CDNPoP struct {
	Name  string  `json:"name"`
	Alive bool    `json:"alive"`
	Self  bool    `json:"self"`
	Score float64 `json:"score"`
	RTTms float64 `json:"rtt_ms"`
}

// SetCDN makes the dashboard show the CDN figures f returns; a PoP calls
// it once its content tier runs.
func (s *Server) SetCDN(f func() CDN) { s.cdn.Store(&f) }
