package store

import "slices"

// PeekMeta returns key's metadata without counting a hit or moving the
// entry in either tier: Walk's companion, for a purge or a directory that
// reads what is stored without disturbing the replacement policy.
func (s *Store) PeekMeta(key string) ([]byte, bool) {
	h, err := s.hold(key)
	if err != nil {
		return nil, false
	}
	defer h.Release()
	if h.meta != nil {
		return slices.Clone(h.meta), true // it may be in the arena
	}
	return s.loadMeta(h.e), true
}
