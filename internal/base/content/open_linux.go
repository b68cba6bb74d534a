package content

import "golang.org/x/sys/unix"

// resolveConfined is openat2's confinement: no component may leave the
// root (".." above it, an absolute symlink) and no symlink is followed at
// all, nor a /proc magic link.
const resolveConfined = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openBeneath opens rel beneath the root with openat2(2) (Linux 5.6+),
// falling back to the O_NOFOLLOW walk when the kernel lacks it (ENOSYS,
// remembered) or a seccomp filter refuses it (EPERM), and checks that the
// result is a regular file.
func (r *rootDir) openBeneath(rel string) (int, error) {
	if !validRel(rel) {
		return -1, unix.EXDEV
	}
	if r.walk || r.noOpenat2.Load() {
		return r.walkRegular(rel)
	}
	how := unix.OpenHow{Flags: fileFlags, Resolve: resolveConfined}
	for range 8 {
		fd, err := unix.Openat2(r.fd, rel, &how)
		switch err {
		case nil:
			return regularBlocking(fd)
		case unix.EINTR, unix.EAGAIN: // EAGAIN: a concurrent rename; retry
			continue
		case unix.ENOSYS:
			r.noOpenat2.Store(true)
		case unix.EPERM:
		default:
			return -1, err
		}
		break
	}
	return r.walkRegular(rel)
}

func (r *rootDir) walkRegular(rel string) (int, error) {
	fd, err := walkOpen(r.fd, rel)
	if err != nil {
		return -1, err
	}
	return regularBlocking(fd)
}
