package store

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
		return h.meta, true
	}
	return s.loadMeta(h.e), true
}
