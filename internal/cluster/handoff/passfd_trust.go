//go:build linux

package handoff

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// dialTrusted connects to the SOCK_SEQPACKET socket at path if t trusts it.
// The path is walked one component at a time from an O_PATH descriptor of
// t.Dir with O_NOFOLLOW, and the socket is connected through that
// descriptor (/proc/self/fd/N, as systemd's connect_unix_path does), so
// that swapping a component for a symbolic link between the check and the
// connect cannot redirect it. The peer's credentials are checked before
// the connection is returned, so no descriptor is ever sent before.
func dialTrusted(path string, t SocketTrust) (*net.UnixConn, error) {
	rel, err := relInside(path, t.Dir)
	if err != nil {
		return nil, err
	}
	fd, err := walkNoFollow(t.Dir, rel)
	if err != nil {
		return nil, err
	}
	via := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Access(via, unix.F_OK); err != nil {
		// No /proc (a bare container): connect by the path just checked;
		// the peer's credentials are still checked below.
		via = filepath.Join(t.Dir, rel)
	}
	uc, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: via, Net: "unixpacket"})
	unix.Close(fd)
	if err != nil {
		return nil, fmt.Errorf("handoff: dial %s: %w", path, err)
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("handoff: dial %s: %w", path, err)
	}
	var cred *unix.Ucred
	cerr := rc.Control(func(s uintptr) {
		cred, err = unix.GetsockoptUcred(int(s), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cerr != nil {
		err = cerr
	}
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("handoff: %s: peer credentials: %w", path, err)
	}
	if int(cred.Uid) != t.UID {
		uc.Close()
		return nil, fmt.Errorf("%w: %s is served by uid %d (pid %d), want uid %d", ErrSocketPeer, path, cred.Uid, cred.Pid, t.UID)
	}
	return uc, nil
}

// relInside returns path relative to dir, refusing relative paths, ".."
// and "." components, and paths not strictly below dir (lexically).
func relInside(path, dir string) (string, error) {
	if !filepath.IsAbs(path) || !filepath.IsAbs(dir) {
		return "", fmt.Errorf("%w: %q is not an absolute path below %q", ErrSocketOutsideDir, path, dir)
	}
	for _, c := range strings.Split(path, "/") {
		if c == ".." || c == "." {
			return "", fmt.Errorf("%w: %q holds %q", ErrSocketOutsideDir, path, c)
		}
	}
	d := filepath.Clean(dir)
	p := filepath.Clean(path)
	prefix := d + "/"
	if d == "/" {
		prefix = "/"
	}
	rel, ok := strings.CutPrefix(p, prefix)
	if !ok || rel == "" {
		return "", fmt.Errorf("%w: %q is outside %q", ErrSocketOutsideDir, path, dir)
	}
	return rel, nil
}

// walkNoFollow opens rel below dir one component at a time with
// O_PATH|O_NOFOLLOW and returns an O_PATH descriptor of the final one, which
// must be a socket; every earlier one must be a directory (a symbolic link
// is opened as itself by O_NOFOLLOW and refused as not a directory).
func walkNoFollow(dir, rel string) (int, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("handoff: handoff directory %s: %w", dir, err)
	}
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			// Missing (the node stopped) is not a trust refusal.
			return -1, fmt.Errorf("handoff: dial %s: %w", filepath.Join(dir, rel), err)
		}
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("handoff: %s: %w", filepath.Join(dir, rel), err)
		}
		want, what := uint32(unix.S_IFDIR), "a directory"
		if i == len(parts)-1 {
			want, what = unix.S_IFSOCK, "a socket"
		}
		if st.Mode&unix.S_IFMT != want {
			unix.Close(fd)
			return -1, fmt.Errorf("%w: %s is not %s (%s)", ErrSocketOutsideDir, filepath.Join(append([]string{dir}, parts[:i+1]...)...), what, fileType(st.Mode))
		}
	}
	return fd, nil
}

func fileType(m uint32) string {
	switch m & unix.S_IFMT {
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFREG:
		return "regular file"
	}
	return "mode " + strconv.FormatUint(uint64(m&unix.S_IFMT), 8)
}

// sameUser reports whether the process at the other end of uc runs as this
// process's effective user (SO_PEERCRED): a node takes moves and tables only
// from its own user, whatever the socket file's mode lets connect (root).
func sameUser(uc *net.UnixConn) bool {
	rc, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	cerr := rc.Control(func(s uintptr) {
		cred, err = unix.GetsockoptUcred(int(s), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	return cerr == nil && err == nil && int(cred.Uid) == os.Geteuid()
}
