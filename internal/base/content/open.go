package content

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
)

// ErrNotRegular: the name of a file entry no longer names a regular file
// (it was replaced by a FIFO, socket, device or directory since the scan).
var ErrNotRegular = errors.New("content: not a regular file")

// rootDir is a site root held open by descriptor, so that every open of a
// file can be resolved beneath it at open time (Table.OpenFile), whatever
// happens to the root's path or the names under it after the scan.
type rootDir struct {
	f  *os.File // keeps fd open while a Table uses it; the GC closes it after
	fd int
	// noOpenat2 is set once openat2(2) answered ENOSYS (Linux before 5.6):
	// every later open takes the O_NOFOLLOW walk.
	noOpenat2 atomic.Bool
	// walk forces the O_NOFOLLOW walk (tests of the fallback).
	walk bool
}

// openRoot opens the directory real for resolving files beneath it.
func openRoot(real string) (*rootDir, error) {
	f, err := os.Open(real)
	if err != nil {
		return nil, err
	}
	return &rootDir{f: f, fd: int(f.Fd())}, nil
}

// OpenFile opens the file of e, a file entry of t, for reading, confined to
// t's root at open time: on Linux with openat2(2) and RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS from the root's descriptor
// (where openat2 is missing, and on other systems, by opening one component
// at a time with O_NOFOLLOW). A name that was swapped for a symlink after
// the scan — the file itself or any directory above it — fails to open, and
// so does anything that is not a regular file (the open is non-blocking, so
// a FIFO cannot hang the caller; the returned descriptor is blocking again,
// as sendfile and reads want). Like nginx's disable_symlinks on, this
// refuses symlinks inside the root too; the scan leaves them out of the
// table for the same reason. Hard links are not symlinks and are followed
// (they cannot cross file systems, and only the site's owner can make them).
//
// The file is not registered with the runtime's netpoller (regular files
// are never pollable), which saves os.Open's failing epoll_ctl.
func (t *Table) OpenFile(e *Entry) (*os.File, error) {
	if e == nil || e.IsDir || len(e.URL) < 2 || e.URL[0] != '/' {
		return nil, fmt.Errorf("content: open %v: %w", e, ErrNotRegular)
	}
	if e.Remote {
		return nil, fmt.Errorf("content: open %s: %w", e.URL, ErrRemote)
	}
	r := t.dir
	fd, err := r.openBeneath(e.URL[1:])
	runtime.KeepAlive(r.f)
	if err != nil {
		return nil, fmt.Errorf("content: open %s: %w", e.URL, err)
	}
	return os.NewFile(uintptr(fd), e.Path), nil
}

// validRel reports whether rel is a relative path of plain names (no "",
// "." or ".." component): what a table URL always is. It is checked again
// before any open so that the O_NOFOLLOW walk can never climb.
func validRel(rel string) bool {
	if rel == "" || rel[0] == '/' {
		return false
	}
	for seg := range strings.SplitSeq(rel, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}
