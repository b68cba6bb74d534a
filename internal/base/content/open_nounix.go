//go:build !unix

package content

import "errors"

// openBeneath fails closed where neither openat2 nor O_NOFOLLOW exists:
// shoal serves files only where every open can be confined to the root.
func (r *rootDir) openBeneath(rel string) (int, error) {
	return -1, errors.ErrUnsupported
}
