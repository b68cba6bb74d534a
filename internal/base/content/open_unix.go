//go:build unix

package content

import (
	"strings"

	"golang.org/x/sys/unix"
)

// fileFlags open a file for reading: O_NOFOLLOW refuses a final symlink,
// O_NONBLOCK keeps the open of a FIFO from blocking (cleared once the file
// is known to be regular), O_NOCTTY keeps a terminal from becoming ours.
const fileFlags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY

// walkOpen opens rel beneath the directory dirfd one component at a time,
// each with O_NOFOLLOW (directories also with O_DIRECTORY), so no symlink
// is followed anywhere on the way: the fallback where openat2 is missing.
func walkOpen(dirfd int, rel string) (int, error) {
	if !validRel(rel) {
		return -1, unix.EXDEV
	}
	fd := dirfd
	for {
		i := strings.IndexByte(rel, '/')
		if i < 0 {
			break
		}
		next, err := openatRetry(fd, rel[:i], unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		if fd != dirfd {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd, rel = next, rel[i+1:]
	}
	f, err := openatRetry(fd, rel, fileFlags)
	if fd != dirfd {
		unix.Close(fd)
	}
	return f, err
}

func openatRetry(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// regularBlocking checks that fd, opened with fileFlags, is a regular file
// and makes it blocking again; otherwise it closes fd.
func regularBlocking(fd int) (int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, ErrNotRegular
	}
	// F_SETFL with 0 clears O_NONBLOCK (the only status flag we set).
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
