package node

import (
	"strconv"
	"sync/atomic"
)

// sizesPath serves the node's size index: one line "SIZE URL\n" per file of
// the current content version, sorted by URL. The front's health checker
// fetches it whenever the content_version in the status report changes, so
// the policies get object sizes on the paths where the front never sees a
// response (passfd, repair, redirect; TB-CCRD's url_size column).
const sizesPath = "/.shoal/sizes"

// sizeIndex is the index built for one content version.
type sizeIndex struct {
	version uint64
	body    []byte
}

// sizeIndexCache holds the last index built; rebuilt on a new version.
type sizeIndexCache struct{ p atomic.Pointer[sizeIndex] }

// sizes returns the size index of the current content version.
func (s *Server) sizes() []byte {
	tbl := s.store.Snapshot()
	if p := s.sizeIdx.p.Load(); p != nil && p.version == tbl.Version() {
		return p.body
	}
	var b []byte
	for _, e := range tbl.Entries() {
		if e.IsDir {
			continue
		}
		b = strconv.AppendInt(b, e.Size, 10)
		b = append(b, ' ')
		b = append(b, e.URL...)
		b = append(b, '\n')
	}
	s.sizeIdx.p.Store(&sizeIndex{version: tbl.Version(), body: b})
	return b
}
