//go:build linux

package handoff

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Raw system calls for the front's per-connection handoff work. Every call
// here is on a non-blocking descriptor or cannot block at all (socket
// options, ioctls, MSG_DONTWAIT reads, bpf map updates), so the runtime's
// syscall bookkeeping (entersyscall/exitsyscall) buys nothing; worse, on a
// front that idles between connections the first bookkept call of each busy
// spell wakes the runtime's sysmon thread, which then polls every 20 µs until
// the process is idle again — a profile of the repair path with one request
// per connection put a quarter of the front's CPU there.

func rawErr(e unix.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

func rawSetsockoptInt(fd, level, opt, v int) error {
	iv := int32(v)
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&iv)), 4, 0)
	return rawErr(e)
}

func rawGetsockoptInt(fd, level, opt int) (int, error) {
	var iv int32
	l := uint32(4)
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&iv)), uintptr(unsafe.Pointer(&l)), 0)
	return int(iv), rawErr(e)
}

func rawGetsockoptBytes(fd, level, opt int, b []byte) (int, error) {
	l := uint32(len(b))
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, e
	}
	return int(l), nil
}

func rawIoctlInt(fd int, req uint) (int, error) {
	var v int32
	_, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(unsafe.Pointer(&v)))
	return int(v), rawErr(e)
}

// rawSockname returns the IPv4 address of fd's local (peer false) or remote
// (peer true) end; ok is false for anything but AF_INET.
func rawSockname(fd int, peer bool) (ap netip.AddrPort, ok bool, err error) {
	var sa unix.RawSockaddrInet4
	l := uint32(unsafe.Sizeof(sa))
	nr := uintptr(unix.SYS_GETSOCKNAME)
	if peer {
		nr = unix.SYS_GETPEERNAME
	}
	if _, _, e := unix.RawSyscall(nr, uintptr(fd), uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&l))); e != 0 {
		return netip.AddrPort{}, false, e
	}
	if sa.Family != unix.AF_INET {
		return netip.AddrPort{}, false, nil
	}
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(p[0])<<8|uint16(p[1])), true, nil
}

// rawPeek reads up to len(b) bytes of fd's (selected repair) queue without
// consuming them and without waiting.
func rawPeek(fd int, b []byte) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// rawWrite writes b to the non-blocking descriptor fd once.
func rawWrite(fd uintptr, b []byte) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// rawRead reads from the non-blocking descriptor fd once.
func rawRead(fd uintptr, b []byte) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
