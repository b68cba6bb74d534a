package node

import (
	"fmt"
	"sync"

	"shoal/internal/content"
)

// publishState is the node's side of a two-phase publish (internal/publish):
// at most one version is prepared at a time.
type publishState struct {
	mu      sync.Mutex
	version uint64 // site version being prepared, 0 when none
	staged  *content.Staged
	current uint64 // site version last committed (0: the one started with)
}

// PreparePublish scans root, the tree of site version v, and holds it
// ready without serving it: the slow phase, which may fail (a missing or
// unreadable tree) without changing anything. A later prepare replaces an
// earlier one that was never committed.
func (s *Server) PreparePublish(v uint64, root string) error {
	if v <= s.pub.currentVersion() {
		return fmt.Errorf("node: prepare version %d: already at version %d", v, s.pub.currentVersion())
	}
	st, err := s.store.Prepare(root)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	p := &s.pub
	p.mu.Lock()
	p.version, p.staged = v, st
	p.mu.Unlock()
	return nil
}

// CommitPublish switches the node to the prepared version v (a pointer
// swap: every request after it, and none before, sees the new table) and
// drops the changed and removed URLs from the memory cache, whose objects
// would otherwise sit there until evicted (a stale one is never served: a
// cache hit must match the new table's ETag). It returns what changed.
func (s *Server) CommitPublish(v uint64) (content.Diff, error) {
	p := &s.pub
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.staged == nil || p.version != v {
		return content.Diff{}, fmt.Errorf("node: commit version %d: not prepared (prepared: %d)", v, p.version)
	}
	d, err := s.store.Commit(p.staged)
	if err != nil {
		return content.Diff{}, fmt.Errorf("node: %w", err)
	}
	p.staged, p.version, p.current = nil, 0, v
	if s.cache != nil {
		for _, u := range d.Changed {
			s.cache.Remove(u)
		}
		for _, u := range d.Removed {
			s.cache.Remove(u)
		}
	}
	s.cfg.Logger.Info("site version switched", "version", v, "root", s.store.Root(),
		"added", len(d.Added), "changed", len(d.Changed), "removed", len(d.Removed))
	return d, nil
}

// AbortPublish forgets the prepared version v, if it is the one prepared.
func (s *Server) AbortPublish(v uint64) {
	p := &s.pub
	p.mu.Lock()
	if p.version == v {
		p.staged, p.version = nil, 0
	}
	p.mu.Unlock()
}

// SiteVersion is the site version the node serves (0: the tree it started
// with, before any publish).
func (s *Server) SiteVersion() uint64 { return s.pub.currentVersion() }

func (p *publishState) currentVersion() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current
}
