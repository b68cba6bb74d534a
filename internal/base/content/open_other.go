//go:build unix && !linux

package content

// openBeneath opens rel beneath the root with the O_NOFOLLOW walk (no
// openat2 outside Linux) and checks that it is a regular file.
func (r *rootDir) openBeneath(rel string) (int, error) {
	fd, err := walkOpen(r.fd, rel)
	if err != nil {
		return -1, err
	}
	return regularBlocking(fd)
}
