package front

import (
	"strings"

	"shoal/internal/base/content"
)

// internalURL reports whether u, a request's path (or absolute-form
// target) as received, names the nodes' internal path space /.shoal/ —
// the status report with RSS, goroutines and socket paths that only the
// front's health checker and the operator may read, on the node's own port.
// The front answers such requests 404 itself on every data
// path, so they never reach a node through it. The test is made on the
// decoded, cleaned path, so "/%2eshoal/status" and "//.shoal/status" are
// caught even though a node would not answer them; a path without ".shoal"
// or '%' costs two substring searches and no allocation.
func internalURL(u string) bool {
	if len(u) > 0 && u[0] != '/' {
		// Absolute-form "scheme://authority/path": keep the path.
		i := strings.Index(u, "://")
		if i < 0 {
			return false // authority-form or "*": never a node path
		}
		u = u[i+3:]
		j := strings.IndexByte(u, '/')
		if j < 0 {
			return false
		}
		u = u[j:]
	}
	if !strings.Contains(u, ".shoal") && strings.IndexByte(u, '%') < 0 {
		return false
	}
	c, _, err := content.CleanURL(u)
	if err != nil {
		return false // the node refuses it (400, 403) without looking
	}
	return c == "/.shoal" || strings.HasPrefix(c, "/.shoal/")
}
