package trace

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Summary describes a workload the way an operator sizing caches needs it
// (`shoal trace stats`): how many requests and distinct objects,
// how many bytes the distinct objects take, how skewed popularity is, and how
// much memory covers most requests.
type Summary struct {
	// Requests is the number of well-formed records; Malformed the lines the
	// reader skipped (0 for sources that do not count them).
	Requests  int64 `json:"requests"`
	Malformed int   `json:"malformed"`
	// NoRequest counts the lines of answers to connections that sent no
	// request (request "-": refused at a limit, timed out), which are not
	// requests to replay.
	NoRequest int `json:"no_request"`
	// UniqueURLs is the number of distinct URLs; SizedURLs those with at least
	// one 200 response, whose size is known.
	UniqueURLs int `json:"unique_urls"`
	SizedURLs  int `json:"sized_urls"`
	// UniqueBytes is Σ object size over distinct URLs, an object's size being
	// its largest 200-response size (as Sizes); the working set.
	UniqueBytes int64 `json:"unique_bytes"`
	// TransferredBytes is Σ logged response bytes.
	TransferredBytes int64 `json:"transferred_bytes"`
	// OneTimers is the number of URLs requested exactly once.
	OneTimers int `json:"one_timers"`
	// ZipfAlpha is the popularity exponent α: minus the least-squares slope of
	// log(request count) against log(popularity rank), fitted over URLs
	// requested at least twice (the one-timers' flat tail would bias it).
	// Web traces show α ≈ 0.6–0.9 (Breslau et al. 1999). 0 if fewer than two
	// such URLs.
	ZipfAlpha float64 `json:"zipf_alpha"`
	// Cover90, Cover95 and Cover99 are the bytes of the most popular objects
	// that together receive 90, 95 and 99 % of all requests: the memory a
	// perfect popularity cache would need. URLs of unknown size count 0 bytes.
	Cover90 int64 `json:"cover90_bytes"`
	Cover95 int64 `json:"cover95_bytes"`
	Cover99 int64 `json:"cover99_bytes"`
	// Sites counts requests per virtual host, for logs that carry one
	// (Record.VHost), by name; nil for single-site logs.
	Sites []SiteCount `json:"sites,omitempty"`
}

// SiteCount is one virtual host's share of a log.
type SiteCount struct {
	Site             string `json:"site"`
	Requests         int64  `json:"requests"`
	UniqueURLs       int    `json:"unique_urls"`
	TransferredBytes int64  `json:"transferred_bytes"`
}

// Key is the record's content key: VHost + URL ("example.com/index.html")
// for a multi-site log, the URL alone otherwise, so two sites' "/" stay
// distinct objects in every table keyed by it.
func (r Record) Key() string {
	if r.VHost == "" {
		return r.URL
	}
	return r.VHost + r.URL
}

// Stats reads src to the end and summarises it. Memory grows with distinct
// URLs, not requests. If src has a Malformed() int method (Reader does), its
// count is reported.
func Stats(src Source) (Summary, error) {
	var s Summary
	urls := map[string]*urlStat{}
	sites := map[string]*SiteCount{}
	for {
		rec, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return s, fmt.Errorf("stats: %w", err)
		}
		s.count(rec, urls, sites)
	}
	if m, ok := src.(interface{ Malformed() int }); ok {
		s.Malformed = m.Malformed()
	}
	if m, ok := src.(interface{ NoRequest() int }); ok {
		s.NoRequest = m.NoRequest()
	}
	if s.Requests == 0 {
		return s, ErrNoRecords
	}
	for _, sc := range sites {
		s.Sites = append(s.Sites, *sc)
	}
	slices.SortFunc(s.Sites, func(a, b SiteCount) int { return strings.Compare(a.Site, b.Site) })
	rs := s.rank(urls)
	s.ZipfAlpha = zipfAlpha(rs)
	s.cover(rs)
	return s, nil
}

// urlStat is what Stats keeps per distinct URL: its requests and its size
// (the largest 200-response size, -1 while unknown).
type urlStat struct {
	count int64
	size  int64
}

// rankedURL is a URL with its statistics, in popularity order.
type rankedURL struct {
	url string
	urlStat
}

// count adds one record to the request and byte totals, to its URL's
// statistics and, for a multi-site log, to its site's.
func (s *Summary) count(rec Record, urls map[string]*urlStat, sites map[string]*SiteCount) {
	s.Requests++
	if rec.Bytes > 0 {
		s.TransferredBytes += rec.Bytes
	}
	key := rec.Key()
	u := urls[key]
	if u == nil {
		u = &urlStat{size: -1}
		urls[key] = u
	}
	if rec.VHost != "" {
		sc := sites[rec.VHost]
		if sc == nil {
			sc = &SiteCount{Site: rec.VHost}
			sites[rec.VHost] = sc
		}
		sc.Requests++
		if u.count == 0 {
			sc.UniqueURLs++
		}
		if rec.Bytes > 0 {
			sc.TransferredBytes += rec.Bytes
		}
	}
	u.count++
	if rec.Status == 200 && rec.Bytes > u.size {
		u.size = rec.Bytes
	}
}

// rank fills the per-URL totals (distinct, sized and one-time URLs, unique
// bytes) and returns the URLs most requested first, ties by URL so that the
// result does not depend on map order.
func (s *Summary) rank(urls map[string]*urlStat) []rankedURL {
	rs := make([]rankedURL, 0, len(urls))
	for k, u := range urls {
		rs = append(rs, rankedURL{k, *u})
		if u.size >= 0 {
			s.SizedURLs++
			s.UniqueBytes += u.size
		}
		if u.count == 1 {
			s.OneTimers++
		}
	}
	s.UniqueURLs = len(rs)
	slices.SortFunc(rs, func(a, b rankedURL) int {
		if a.count != b.count {
			if a.count > b.count {
				return -1
			}
			return 1
		}
		return strings.Compare(a.url, b.url)
	})
	return rs
}

// zipfAlpha is minus the least-squares slope of log(count) against
// log(rank) over the ranked URLs requested at least twice (Summary.ZipfAlpha).
func zipfAlpha(rs []rankedURL) float64 {
	var sx, sy, sxx, sxy, n float64
	for i, r := range rs {
		if r.count < 2 {
			break
		}
		x, y := math.Log(float64(i+1)), math.Log(float64(r.count))
		sx, sy, sxx, sxy, n = sx+x, sy+y, sxx+x*x, sxy+x*y, n+1
	}
	if d := n*sxx - sx*sx; n >= 2 && d > 0 {
		return -(n*sxy - sx*sy) / d
	}
	return 0
}

// cover sets Cover90, Cover95 and Cover99 from the ranked URLs: the bytes
// of the most popular objects taken in order until they receive that share
// of all requests.
func (s *Summary) cover(rs []rankedURL) {
	targets := []struct {
		frac float64
		out  *int64
	}{{0.90, &s.Cover90}, {0.95, &s.Cover95}, {0.99, &s.Cover99}}
	var reqs, bytes int64
	t := 0
	for _, r := range rs {
		if t == len(targets) {
			break
		}
		reqs += r.count
		bytes += max(r.size, 0)
		for t < len(targets) && float64(reqs) >= targets[t].frac*float64(s.Requests) {
			*targets[t].out = bytes
			t++
		}
	}
}
