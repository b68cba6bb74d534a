package pop

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"shoal/internal/cdn/replica"
)

// ContentStatsView is GET /content: the content tier's figures.
type ContentStatsView struct {
	// Gateway is where clients and other PoPs fetch content.
	Gateway string `json:"gateway"`
	Origin  string `json:"origin"`
	Objects int    `json:"objects"`
	DirKeys int    `json:"directory_keys"`
	// Counts are cumulative counters (internal/cdn/pop Counters, and the
	// nodes' hits, misses, revalidated and stale).
	Counts map[string]uint64 `json:"counts"`
}

// ContentStats returns the content tier's figures.
func (p *PoP) ContentStats() ContentStatsView {
	if p.cm != nil {
		c := p.cdnCounts()
		return ContentStatsView{Gateway: p.cm.m.gw(), Origin: strings.Join(p.cfg.Origins, ","), Objects: int(c["objects"]), DirKeys: int(c["directory_keys"]), Counts: c}
	}
	return ContentStatsView{}
}

func (p *PoP) serveContent(w http.ResponseWriter, r *http.Request) { writeJSON(w, p.ContentStats()) }

// servePurge is POST /purge?url=/path | prefix=/dir/ | tag=KEY [&host=NAME]
// [&soft=1]: 200 when every live PoP confirmed, 504 naming the PoPs that
// did not (they apply it when they are back).
func (p *PoP) servePurge(w http.ResponseWriter, r *http.Request) {
	pr, err := parsePurge(r)
	if err != nil {
		http.Error(w, err.Error()+": give ?url=/path, ?prefix=/dir/ or ?tag=KEY", http.StatusBadRequest)
		return
	}
	res, err := p.Purge(r.Context(), pr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(res.Missing) > 0 {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Shoal-Purge-Missing", strings.Join(res.Missing, ","))
		w.WriteHeader(http.StatusGatewayTimeout)
		writeJSON(w, res)
		return
	}
	writeJSON(w, res)
}

// Purge applies pr at every PoP alive in this PoP's view and reports which
// confirmed (at most confirmTimeout); the others apply it when they are
// back.
func (p *PoP) Purge(ctx context.Context, pr replica.Purge) (PurgeResult, error) {
	if p.cm == nil {
		return PurgeResult{}, errors.New("pop: no content tier (start the PoP with --origin)")
	}
	return p.cm.m.issuePurge(ctx, pr)
}
