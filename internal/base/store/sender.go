package store

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
)

// errAgain is sendfile's "the socket is full, wait".
var errAgain = errors.New("store: socket full")

// sendChunk bounds one sendfile(2) call, so that Progress is called at
// least that often during a large body.
const sendChunk = 1 << 20

// copyBufs are the buffers bodies go through to connections that cannot
// take sendfile (TLS): pooled, so a TLS response does not allocate one.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// Sender writes bodies to one connection: an inline body is written from
// the arena, a body in a file goes by sendfile(2) from the page cache when
// the connection is a socket (it implements syscall.Conn), and through a
// pooled buffer otherwise (a TLS connection). Make one per connection (it
// caches the socket's RawConn and its write step, so Send allocates
// nothing); it is not safe for concurrent use.
type Sender struct {
	w    io.Writer
	rc   syscall.RawConn
	step func(fd uintptr) bool
	// Progress, if set, is called after each chunk sent (at most every
	// sendChunk bytes), for a write timeout that watches progress.
	Progress func()

	// the sendfile in progress
	in     int
	off    int64
	remain int64
	sent   int64
	err    error
}

// NewSender returns a Sender writing to w.
func NewSender(w io.Writer) *Sender {
	s := &Sender{w: w}
	if sc, ok := w.(syscall.Conn); ok && haveSendfile {
		if rc, err := sc.SyscallConn(); err == nil {
			s.rc = rc
			s.step = s.sendStep
		}
	}
	return s
}

// Send writes n bytes of h's body from off and returns how many went out.
// Fewer than n with a nil error cannot happen: a body file that shrank is
// io.ErrUnexpectedEOF.
func (s *Sender) Send(h *Handle, off, n int64) (int64, error) {
	e := h.e
	if off < 0 || n < 0 || off+n > e.size {
		return 0, fmt.Errorf("store: send %s: range %d+%d outside %d bytes", e.key, off, n, e.size)
	}
	if n == 0 {
		return 0, nil
	}
	if h.inline {
		return h.s.arena.writeRange(s.w, e.first, int64(e.bodyAt)+off, n)
	}
	if s.rc == nil {
		return s.copy(h, off, n)
	}
	s.in, s.off, s.remain, s.sent, s.err = e.fd, e.off+off, n, 0, nil
	if err := s.rc.Write(s.step); err != nil && s.err == nil {
		s.err = err
	}
	if s.err != nil {
		return s.sent, fmt.Errorf("store: sendfile %s: %w", e.key, s.err)
	}
	return s.sent, nil
}

// sendStep is the RawConn write step: sendfile until done, an error, or a
// full socket (false: the runtime waits for room and calls again).
func (s *Sender) sendStep(fd uintptr) bool {
	for s.remain > 0 {
		m, err := sendfile(int(fd), s.in, &s.off, int(min(s.remain, sendChunk)))
		if m > 0 {
			s.remain -= int64(m)
			s.sent += int64(m)
			if s.Progress != nil {
				s.Progress()
			}
		}
		switch {
		case err == errAgain:
			return false
		case err != nil:
			s.err = err
			return true
		case m == 0:
			s.err = io.ErrUnexpectedEOF // the file shrank
			return true
		}
	}
	return true
}

// copy sends through a pooled buffer.
func (s *Sender) copy(h *Handle, off, n int64) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var sent int64
	for sent < n {
		m, err := h.ReadAt(buf[:min(int64(len(buf)), n-sent)], off+sent)
		if m > 0 {
			w, werr := s.w.Write(buf[:m])
			sent += int64(w)
			if s.Progress != nil {
				s.Progress()
			}
			if werr != nil {
				return sent, werr
			}
		}
		if err != nil && (err != io.EOF || sent < n) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return sent, err
		}
	}
	return sent, nil
}
