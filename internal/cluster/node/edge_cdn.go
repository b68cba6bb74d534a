package node

import (
	"strings"
	"time"

	"shoal/internal/base/httpcache"
)

// EdgeEntry is one stored response of a cache-mode node as the CDN tier's
// purge and directory see it: its store key (the cache key, then the Vary
// variant after a NUL), its surrogate keys (the Surrogate-Key field's
// space-separated values) and when it arrived.
type EdgeEntry struct {
	Key    string
	Tags   []string
	Stored time.Time
	Size   int64
}

// EdgeWalk calls f for every stored response (Vary markers left out) until
// f returns false. It reads each entry's metadata without counting a hit,
// so a purge's walk does not disturb the replacement policy.
func (s *Server) EdgeWalk(f func(EdgeEntry) bool) {
	if s.edge == nil {
		return
	}
	s.edge.store.WalkMeta("", func(key string, size int64, meta []byte) bool {
		sr, err := decodeEntry(meta)
		if err != nil {
			return true // a Vary marker, or unreadable
		}
		return f(EdgeEntry{Key: key, Tags: strings.Fields(strings.Join(sr.Header.Values("Surrogate-Key"), " ")),
			Stored: sr.ResponseTime, Size: size})
	})
}

// EdgeRemove drops a stored response (a hard purge).
func (s *Server) EdgeRemove(key string) bool {
	if s.edge == nil {
		return false
	}
	return s.edge.store.Remove(key)
}

// EdgeMarkStale makes a stored response stale now (a soft purge): it is
// revalidated before its next use, and may still answer where a stale one
// may (stale-while-revalidate, stale-if-error, an unreachable upstream).
func (s *Server) EdgeMarkStale(key string) bool {
	if s.edge == nil {
		return false
	}
	meta, ok := s.edge.store.PeekMeta(key)
	if !ok {
		return false
	}
	sr, err := decodeEntry(meta)
	if err != nil {
		return false
	}
	stale := *sr
	stale.Fresh.Lifetime = 0
	return s.edge.store.SetMeta(key, encodeEntry(&stale)) == nil
}

// EdgeHas reports whether key is stored.
func (s *Server) EdgeHas(key string) bool {
	if s.edge == nil {
		return false
	}
	ok, _ := s.edge.store.Peek(key)
	return ok
}

// EdgeKey is the store key a cache-mode node gives a request without Vary:
// scheme, host, path and query (httpcache.Key with the node's scheme).
func (s *Server) EdgeKey(host, target string) string {
	scheme := DefaultEdgeScheme
	if s.edge != nil {
		scheme = s.edge.cfg.Scheme
	}
	return httpcache.Key(scheme, host, target)
}
