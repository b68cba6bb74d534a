//go:build linux

// Package uring is a minimal io_uring ring for socket sends and receives:
// one io_uring_enter(2) submits every queued operation and waits for the
// next completions, where a reader and a writer on plain sockets pay one
// system call each. In a virtual machine a system call's entry and return
// cost more than the socket work of a small request, so a client that
// batches them leaves more of a shared core to the server it measures.
//
// Hand-written because what is needed is small (setup, the two mapped
// rings, send, receive, timeout-bounded waits) and the Go io_uring
// libraries are thin ports that are not among the well-kept modules this
// project depends on. The ring is made with SINGLE_ISSUER and
// DEFER_TASKRUN when the kernel has them (6.1): completion work then runs
// when the owner waits, not from the context of whoever made the socket
// ready, so the server that wrote an answer is not charged for waking us.
// Those flags tie the ring to one thread: call everything from one
// goroutine locked to its thread (runtime.LockOSThread).
package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnsupported is returned by New where the kernel has no io_uring or it
// is turned off (kernel.io_uring_disabled, a seccomp filter).
var ErrUnsupported = errors.New("io_uring is not available")

// Operation codes and flags of the kernel ABI (include/uapi/linux/io_uring.h).
const (
	opSend = 26
	opRecv = 27

	sqeIOLink = 1 << 2

	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13

	enterGetEvents = 1 << 0
	enterExtArg    = 1 << 3

	offSQRing = 0
	offSQEs   = 0x10000000
)

type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqOffsets
	cqOff                                                                  cqOffsets
}

// sqe is the kernel's 64-byte submission queue entry.
type sqe struct {
	opcode, flags uint8
	ioprio        uint16
	fd            int32
	off, addr     uint64
	len, opFlags  uint32
	userData      uint64
	bufIndex      uint16
	personality   uint16
	spliceFdIn    int32
	addr3, pad    uint64
}

// cqe is the kernel's 16-byte completion queue entry.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// getEventsArg is io_uring_getevents_arg, which carries a wait's timeout.
type getEventsArg struct {
	sigmask   uint64
	sigmaskSz uint32
	pad       uint32
	ts        uint64
}

// Ring is one io_uring instance. Queued operations go to the kernel at the
// next Enter; nothing here allocates after New.
type Ring struct {
	fd                            int
	sqHead, sqTail, sqMask, sqArr *uint32
	cqHead, cqTail, cqMask        *uint32
	cqes                          unsafe.Pointer
	sqes                          []sqe
	sqRing, sqeMem                []byte
	entries                       uint32
	ts                            unix.Timespec
	arg                           getEventsArg
}

// New makes a ring with room for entries queued operations (a power of
// two; the completion queue is twice as large).
func New(entries uint32) (*Ring, error) {
	r, err := setup(entries, setupSingleIssuer|setupDeferTaskrun)
	if errors.Is(err, unix.EINVAL) { // a kernel before 6.1
		r, err = setup(entries, 0)
	}
	return r, err
}

func setup(entries, flags uint32) (*Ring, error) {
	p := params{flags: flags}
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	switch e {
	case 0:
	case unix.ENOSYS, unix.EPERM:
		return nil, fmt.Errorf("%w: io_uring_setup: %v", ErrUnsupported, e)
	default:
		return nil, fmt.Errorf("io_uring_setup: %w", e)
	}
	r := &Ring{fd: int(fd), entries: p.sqEntries}
	size := max(p.sqOff.array+p.sqEntries*4, p.cqOff.cqes+p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	m, err := unix.Mmap(r.fd, offSQRing, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Close(r.fd)
		return nil, fmt.Errorf("io_uring rings: %w", err)
	}
	s, err := unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Munmap(m)
		unix.Close(r.fd)
		return nil, fmt.Errorf("io_uring entries: %w", err)
	}
	b := unsafe.Pointer(&m[0])
	at := func(off uint32) *uint32 { return (*uint32)(unsafe.Add(b, off)) }
	r.sqRing, r.sqeMem = m, s
	r.sqHead, r.sqTail, r.sqMask, r.sqArr = at(p.sqOff.head), at(p.sqOff.tail), at(p.sqOff.ringMask), at(p.sqOff.array)
	r.cqHead, r.cqTail, r.cqMask = at(p.cqOff.head), at(p.cqOff.tail), at(p.cqOff.ringMask)
	r.cqes = unsafe.Add(b, p.cqOff.cqes)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&s[0])), p.sqEntries)
	return r, nil
}

// Close releases the ring; operations still in flight are cancelled by
// the kernel.
func (r *Ring) Close() error {
	unix.Munmap(r.sqeMem)
	unix.Munmap(r.sqRing)
	return unix.Close(r.fd)
}

// Room is how many more operations can be queued before the next Enter.
func (r *Ring) Room() int {
	return int(r.entries - (*r.sqTail - atomic.LoadUint32(r.sqHead)))
}

func (r *Ring) push(e sqe) bool {
	tail := *r.sqTail
	if tail-atomic.LoadUint32(r.sqHead) >= r.entries {
		return false
	}
	i := tail & *r.sqMask
	r.sqes[i] = e
	*(*uint32)(unsafe.Add(unsafe.Pointer(r.sqArr), 4*uintptr(i))) = i
	atomic.StoreUint32(r.sqTail, tail+1)
	return true
}

// Send queues a send(2) of b on the socket fd with MSG_NOSIGNAL; with link,
// the next queued operation starts only once this one has sent all of b.
// b must stay untouched until the completion. It reports false when the
// queue is full.
func (r *Ring) Send(fd int, b []byte, link bool, user uint64) bool {
	e := sqe{opcode: opSend, fd: int32(fd), addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))),
		len: uint32(len(b)), opFlags: unix.MSG_NOSIGNAL, userData: user}
	if link {
		e.flags = sqeIOLink
	}
	return r.push(e)
}

// Recv queues a recv(2) into b on the socket fd with flags (MSG_TRUNC on a
// TCP socket drops len(b) bytes without copying them). b must stay
// untouched until the completion. It reports false when the queue is full.
func (r *Ring) Recv(fd int, b []byte, flags uint32, user uint64) bool {
	return r.push(sqe{opcode: opRecv, fd: int32(fd), addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))),
		len: uint32(len(b)), opFlags: flags, userData: user})
}

// Discard queues a receive that drops n bytes in the TCP socket fd without
// copying them (recv(2) with MSG_TRUNC and no buffer). It reports false
// when the queue is full.
func (r *Ring) Discard(fd int, n uint32, user uint64) bool {
	return r.push(sqe{opcode: opRecv, fd: int32(fd), len: n, opFlags: unix.MSG_TRUNC, userData: user})
}

// Enter submits every queued operation and waits until at least one
// completion is ready or wait has passed (wait ≤ 0: no waiting). A wait cut
// short by a signal or the timeout is not an error.
func (r *Ring) Enter(wait time.Duration) error {
	flags, min, argp, argsz := uintptr(0), uintptr(0), uintptr(0), uintptr(0)
	if wait > 0 {
		r.ts = unix.NsecToTimespec(int64(wait))
		r.arg = getEventsArg{ts: uint64(uintptr(unsafe.Pointer(&r.ts)))}
		flags, min = enterGetEvents|enterExtArg, 1
		argp, argsz = uintptr(unsafe.Pointer(&r.arg)), unsafe.Sizeof(r.arg)
	} else {
		flags = enterGetEvents // runs deferred task work, so completions appear
	}
	// What the kernel has not consumed yet is what is queued; a submission
	// cut short (EAGAIN, EBUSY) leaves the rest for the next Enter.
	n := *r.sqTail - atomic.LoadUint32(r.sqHead)
	_, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n), min, flags, argp, argsz)
	switch e {
	case 0, unix.ETIME, unix.EINTR, unix.EAGAIN, unix.EBUSY:
		return nil
	}
	if e == unix.EEXIST {
		return fmt.Errorf("io_uring_enter from a thread other than the ring's (lock the goroutine to its thread): %w", e)
	}
	return fmt.Errorf("io_uring_enter: %w", e)
}

// Reap calls f for every completion ready now, in order, and returns how
// many there were. res is the operation's result: bytes moved, or a
// negated errno.
func (r *Ring) Reap(f func(user uint64, res int32)) int {
	n := 0
	for {
		head := *r.cqHead
		if head == atomic.LoadUint32(r.cqTail) {
			return n
		}
		c := (*cqe)(unsafe.Add(r.cqes, uintptr(head&*r.cqMask)*unsafe.Sizeof(cqe{})))
		user, res := c.userData, c.res
		atomic.StoreUint32(r.cqHead, head+1)
		f(user, res)
		n++
	}
}
