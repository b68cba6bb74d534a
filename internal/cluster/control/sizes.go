package control

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Object sizes. The simulator hands every policy the object's
// size in Pick and Done (from the trace); the live front must do the same or
// tbccrd's cache mirror (seed 000's url_size column) and weblins' size rule
// (seed 001's S) never work. The cluster keeps one URL → size table, as
// TB-CCRD's front does, and fills Request.Size from it in Pick when the
// caller does not know it. It learns from two sources:
//
//   - the relay path: a 200 response's Content-Length, set by the front in
//     Request.Size before Done;
//   - the nodes' size index (GET /.shoal/sizes, fetched by the health
//     checker whenever a node's content_version changes), which covers the
//     handoff paths (passfd, hybrid, repair) and redirect, where the front
//     never sees a response.
//
// The table is bounded by Options.MaxSizes entries and MaxSizeBytes of URL
// text: when full, new URLs are not added (their requests go to the policy
// with Size -1, as before), so a client cannot grow it past the bound (a
// back-end that answers 200 to any URL would otherwise let it); only 200
// responses and the nodes' own files enter it.

// DefaultMaxSizes is Options.MaxSizes' default: a quarter million URLs
// (the NASA trace has about 21,000 distinct ones; at ~100 bytes per entry
// about 25 MB at most).
const DefaultMaxSizes = 1 << 18

// DefaultMaxSizeBytes is Options.MaxSizeBytes' default: 16 MiB of URL text.
const DefaultMaxSizeBytes = 16 << 20

// Size returns the size the cluster knows for url, or -1.
func (c *Cluster) Size(url string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.sizes[url]; ok {
		return n
	}
	return -1
}

// Sizes reports how many URL sizes the cluster knows.
func (c *Cluster) Sizes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sizes)
}

// LearnSizes merges a node's size index into the table (see above).
func (c *Cluster) LearnSizes(sizes map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for u, n := range sizes {
		c.learnSize(u, n)
	}
}

// learnSize records url's size. Called with c.mu held.
func (c *Cluster) learnSize(url string, n int64) {
	if n < 0 {
		return
	}
	if c.sizes == nil {
		c.sizes = map[string]int64{}
	}
	if old, ok := c.sizes[url]; ok {
		if old != n {
			c.sizes[url] = n
		}
		return
	}
	if len(c.sizes) >= c.maxSizes || c.sizeBytes+int64(len(url)) > c.maxSizeBytes {
		return
	}
	c.sizes[url] = n
	c.sizeBytes += int64(len(url))
}

// SizesPath is where a node serves its size index: one "SIZE URL" line per
// file (internal/cluster/node/sizes.go).
const SizesPath = "/.shoal/sizes"

// refreshSizes fetches b's size index when its content version differs
// from the one last learned from it, and merges it. A node without an
// index (404) is not asked again until its version changes; other errors
// are retried at the next check.
func (c *Cluster) refreshSizes(ctx context.Context, client *http.Client, b *Backend, version uint64) {
	if b.sizesFrom.Load() == version+1 {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL+SizesPath, nil)
	if err != nil {
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode == http.StatusNotFound {
			b.sizesFrom.Store(version + 1)
		}
		return
	}
	c.mu.Lock()
	limit := c.maxSizes
	c.mu.Unlock()
	m, err := parseSizes(resp.Body, limit)
	if err != nil {
		return
	}
	c.LearnSizes(m)
	b.sizesFrom.Store(version + 1)
}

// parseSizes reads a size index, at most limit entries; a line that is not
// "SIZE URL" (URL starting with /) is an error.
func parseSizes(r io.Reader, limit int) (map[string]int64, error) {
	m := map[string]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() && len(m) < limit {
		line := sc.Text()
		sp := strings.IndexByte(line, ' ')
		if sp <= 0 || sp+1 >= len(line) || line[sp+1] != '/' {
			return nil, fmt.Errorf("size index: bad line %q", line)
		}
		n, err := strconv.ParseInt(line[:sp], 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("size index: bad size in %q", line)
		}
		m[line[sp+1:]] = n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("size index: %w", err)
	}
	return m, nil
}
