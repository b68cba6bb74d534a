//go:build linux

package store

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapAnon reserves n bytes of anonymous memory outside the Go heap.
// MAP_NORESERVE: untouched pages cost nothing, not even overcommit.
func mapAnon(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
}

// releasePages gives a block's pages back to the kernel; they read as
// zeros afterwards and are charged again only when written.
func releasePages(b []byte) { _ = unix.Madvise(b, unix.MADV_DONTNEED) }

// dropCache asks the kernel to drop f's pages in [off, off+n) from the
// page cache (n = 0: to the end). Pages being written back or sent by
// sendfile are skipped by the kernel, so it is always safe.
func dropCache(f *os.File, off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
}

// writeBehind starts writing back [off, off+n) of f and, once written,
// drops it from the page cache: a large body streaming in keeps a bounded
// number of dirty pages.
func writeBehind(f *os.File, off, n int64) {
	fd := int(f.Fd())
	_ = unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	_ = unix.Fadvise(fd, off, n, unix.FADV_DONTNEED)
}

// startWriteback starts writing [off, off+n) of f back without waiting.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// resident counts the pages of [off, off+n) of f that are in the page
// cache (mincore(2) on a temporary mapping).
func resident(f *os.File, off, n int64) (int64, error) {
	if n <= 0 {
		return 0, nil
	}
	page := int64(os.Getpagesize())
	start := off / page * page
	length := off + n - start
	m, err := unix.Mmap(int(f.Fd()), start, int(length), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(m)
	vec := make([]byte, (length+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return 0, errno
	}
	var c int64
	for _, v := range vec {
		c += int64(v & 1)
	}
	return c * page, nil
}

// sendfile sends up to n bytes of in from *off to the socket out,
// advancing *off; EAGAIN means the socket is full.
func sendfile(out, in int, off *int64, n int) (int, error) {
	m, err := unix.Sendfile(out, in, off, n)
	switch {
	case errors.Is(err, unix.EAGAIN):
		return m, errAgain
	case errors.Is(err, unix.EINTR):
		return m, nil
	}
	return m, err
}

const haveSendfile = true

// memFile returns an anonymous memory file holding body: page cache that
// no disk backs, freed when the file is closed.
func memFile(name string, body []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("shoal-store", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(body); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
