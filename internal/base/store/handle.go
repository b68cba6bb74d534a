package store

import (
	"fmt"
	"io"
)

// Handle is a reference to one entry's body and metadata, from Get or
// Link. It is a small value (copying it does not take another reference)
// and reads the same bytes until Release, whatever happens to the entry
// meanwhile. The zero Handle is invalid.
type Handle struct {
	s      *Store
	e      *entry
	meta   []byte
	mem    bool // the entry was in the memory tier
	inline bool // the body is read from the arena
}

// Valid reports whether h refers to an entry.
func (h *Handle) Valid() bool { return h.e != nil }

// Key is the entry's key.
func (h *Handle) Key() string { return h.e.key }

// Size is the body's length in bytes.
func (h *Handle) Size() int64 { return h.e.size }

// Meta is the entry's metadata blob as it was when the handle was taken;
// it must not be modified, nor kept after Release (it may be memory the
// store reuses).
func (h *Handle) Meta() []byte { return h.meta }

// Value is the value given to Link (nil for stored entries).
func (h *Handle) Value() any { return h.e.val }

// InMemory reports whether the entry was in the memory tier when the
// handle was taken (the hit counts as a memory hit).
func (h *Handle) InMemory() bool { return h.mem }

// Inline reports whether the body is read from the off-heap arena, so that
// AppendBody can copy it; otherwise it is read from a file (the page cache).
func (h *Handle) Inline() bool { return h.inline }

// AppendBody appends n bytes of an inline body from off to dst. It
// reports false, and appends nothing, when the body is not inline or the
// range is outside it.
func (h *Handle) AppendBody(dst []byte, off, n int64) ([]byte, bool) {
	if !h.inline || off < 0 || n < 0 || off+n > h.e.size {
		return dst, false
	}
	return h.s.arena.appendRange(dst, h.e.first, int64(h.e.bodyAt)+off, n), true
}

// ReadAt reads the body as io.ReaderAt does.
func (h *Handle) ReadAt(p []byte, off int64) (int, error) {
	e := h.e
	if off < 0 {
		return 0, fmt.Errorf("store: read %s at %d: negative offset", e.key, off)
	}
	if off >= e.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), e.size-off)
	if h.inline {
		h.s.arena.appendRange(p[:0], e.first, int64(e.bodyAt)+off, n)
	} else if m, err := e.f.ReadAt(p[:n], e.off+off); err != nil {
		return m, fmt.Errorf("store: read %s: %w", e.key, err)
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// WriteTo writes the whole body to w (io.WriterTo), with sendfile(2) when
// w is a socket and the body is in a file.
func (h *Handle) WriteTo(w io.Writer) (int64, error) {
	return NewSender(w).Send(h, 0, h.e.size)
}

// Release gives the reference back; h is invalid afterwards, and a second
// Release does nothing.
func (h *Handle) Release() {
	e, s := h.e, h.s
	if e == nil {
		return
	}
	h.e = nil
	s.mu.Lock()
	e.refs--
	if e.refs == 0 && (!e.inMem || e.dead) {
		s.release(e, false)
	}
	s.unlock()
}
