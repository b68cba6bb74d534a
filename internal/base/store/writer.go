package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// dropWindow is how much of a large body streaming in may sit in the page
// cache before it is written back and dropped: two windows at most.
const dropWindow = 8 << 20

// Writer streams one body into the disk tier (Create). It is not safe for
// concurrent use. The entry becomes visible to Get at Commit, replacing
// any entry for its key; Abort (or a failed Write or Commit) leaves the
// store as it was.
type Writer struct {
	s       *Store
	key     string
	meta    []byte
	want    int64 // announced size, -1 unknown
	f       *os.File
	tmp     string
	bodyOff int64
	room    int
	n       int64  // body bytes written
	small   []byte // the body while it may go inline
	inline  bool   // still collecting small
	dropped int64  // body bytes written back and dropped from the page cache
	err     error
	done    bool
}

// Create starts storing a body of size bytes (-1: unknown, the stream's
// end decides) under key with metadata meta. The body goes to a file as it
// is written, a bounded window of it in memory at a time, so an object of
// any size streams through; one larger than the disk tier fails with
// ErrTooLarge.
func (s *Store) Create(key string, meta []byte, size int64) (*Writer, error) {
	switch {
	case s.cfg.Dir == "":
		return nil, ErrNoDisk
	case len(key) == 0 || len(key) > MaxKey:
		return nil, fmt.Errorf("%w: %d bytes", ErrKey, len(key))
	case len(meta) > MaxMeta:
		return nil, fmt.Errorf("%w: %d bytes", ErrMeta, len(meta))
	case size > s.cfg.DiskBytes:
		return nil, fmt.Errorf("%w: %d bytes, tier %d", ErrTooLarge, size, s.cfg.DiskBytes)
	}
	f, err := os.CreateTemp(filepath.Join(s.cfg.Dir, "tmp"), "put-")
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	w := &Writer{s: s, key: key, meta: append([]byte{}, meta...), want: max(size, -1), f: f, tmp: f.Name(), room: metaRoom(len(meta))}
	w.bodyOff = int64(hdrSize + len(key) + w.room)
	w.inline = s.arena != nil && size <= s.cfg.InlineMax
	if w.inline && size > 0 {
		w.small = make([]byte, 0, size)
	}
	hdr := encodeHeader(key, meta, w.room, 0)
	if _, err := f.Write(append(hdr, make([]byte, int(w.bodyOff)-len(hdr))...)); err != nil {
		w.Abort()
		return nil, fmt.Errorf("store: write %s: %w", key, err)
	}
	return w, nil
}

// Write appends p to the body.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.done {
		return 0, errors.New("store: write after commit or abort")
	}
	switch {
	case w.want >= 0 && w.n+int64(len(p)) > w.want:
		return 0, w.fail(fmt.Errorf("%w: more than %d bytes", ErrShort, w.want))
	case w.n+int64(len(p)) > w.s.cfg.DiskBytes:
		return 0, w.fail(fmt.Errorf("%w: over %d bytes", ErrTooLarge, w.s.cfg.DiskBytes))
	}
	m, err := w.f.Write(p)
	if w.inline {
		if w.n+int64(m) <= w.s.cfg.InlineMax {
			w.small = append(w.small, p[:m]...)
		} else {
			w.inline, w.small = false, nil
		}
	}
	w.n += int64(m)
	if err != nil {
		return m, w.fail(fmt.Errorf("store: write %s: %w", w.key, err))
	}
	if w.n > w.s.cfg.MaxObject && w.n-w.dropped >= 2*dropWindow {
		// Too large for the memory tier: keep the page cache clear of it.
		startWriteback(w.f, w.bodyOff+w.dropped+dropWindow, dropWindow)
		writeBehind(w.f, w.bodyOff+w.dropped, dropWindow)
		w.dropped += dropWindow
	}
	return m, nil
}

// ReadFrom copies r into the body until EOF (io.ReaderFrom, so io.Copy
// uses it), through a pooled buffer.
func (w *Writer) ReadFrom(r io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	var total int64
	for {
		n, err := r.Read(*bp)
		if n > 0 {
			m, werr := w.Write((*bp)[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// Written is the number of body bytes written so far.
func (w *Writer) Written() int64 { return w.n }

func (w *Writer) fail(err error) error {
	w.err = err
	w.Abort()
	return err
}

// Abort drops the body written so far.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	dropCache(w.f, 0, 0)
	w.f.Close()
	os.Remove(w.tmp)
}

// Commit finishes the body and makes the entry visible, replacing any
// entry for the key; the memory tier's policy decides whether it is held
// in memory. A body shorter than the size given to Create is ErrShort.
func (w *Writer) Commit() error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return errors.New("store: commit after commit or abort")
	}
	if w.want >= 0 && w.n != w.want {
		return w.fail(fmt.Errorf("%w: %d of %d bytes", ErrShort, w.n, w.want))
	}
	s := w.s
	hdr := encodeHeader(w.key, w.meta, w.room, w.n)
	if _, err := w.f.WriteAt(hdr, 0); err != nil {
		return w.fail(fmt.Errorf("store: write %s: %w", w.key, err))
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return w.fail(ErrClosed)
	}
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	final := s.path(id)
	err := os.Rename(w.tmp, final)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(final), 0o700); err == nil {
			err = os.Rename(w.tmp, final)
		}
	}
	if err != nil {
		return w.fail(fmt.Errorf("store: commit %s: %w", w.key, err))
	}
	w.done = true
	w.install(id)
	return nil
}

// install puts the committed body in the index, the disk tier and, as the
// policy decides, the memory tier.
func (w *Writer) install(id uint64) {
	s := w.s
	e := &entry{key: w.key, hash: s.hash(w.key), kind: kindStored, size: w.n, meta: w.meta, f: w.f, fd: int(w.f.Fd()),
		off: w.bodyOff, id: id, metaLen: len(w.meta), metaCap: w.room, first: -1}
	s.mu.Lock()
	if !s.closed {
		s.displace(e.hash)
	}
	s.st.MissBytes += w.n
	if s.closed || !s.record(e, diskSize(e.off, e.size)/blockSize) {
		e.dead = true
		s.release(e, false)
		s.unlock()
		return
	}
	s.hot[e.hash] = e
	s.admit(e)
	if e.first >= 0 {
		if w.inline {
			s.arena.copyIn(e.first, int64(e.bodyAt), w.small)
			e.ready = true
		} else {
			s.arena.free(e.first) // the size is known only now: not kept inline
			e.first, e.inline, e.meta, e.bodyAt = -1, false, w.meta, 0
		}
	}
	switch {
	case !e.inMem:
		s.release(e, false) // not admitted: at rest, the file's pages go
	case e.ready:
		// The arena is the memory copy: the file's pages go.
		s.gone = append(s.gone, goneEntry{f: e.f, dropPages: true})
		e.f, e.fd = nil, -1
	}
	s.unlock()
}

// Put stores a body of size bytes (-1: unknown) read from r to its end
// under key with metadata meta: Create, copy, Commit.
func (s *Store) Put(key string, meta []byte, size int64, r io.Reader) error {
	w, err := s.Create(key, meta, size)
	if err != nil {
		return err
	}
	if _, err := w.ReadFrom(r); err != nil {
		w.Abort()
		return fmt.Errorf("store: put %s: %w", key, err)
	}
	return w.Commit()
}

// SetMeta replaces key's metadata and keeps its body (a 304 revalidation
// updates the stored head). A stored entry's file is rewritten in place
// when the metadata fits its region, else the body is copied to a new
// file. Handles taken before keep the metadata they had.
func (s *Store) SetMeta(key string, meta []byte) error {
	if len(meta) > MaxMeta {
		return fmt.Errorf("%w: %d bytes", ErrMeta, len(meta))
	}
	meta = slices.Clone(meta)
	h, err := s.hold(key)
	if err != nil {
		return err
	}
	defer h.Release()
	e := h.e
	if e.kind == kindLinked {
		s.mu.Lock()
		e.meta = meta
		s.mu.Unlock()
		return nil
	}
	if len(meta) > e.metaCap {
		return s.rewrite(&h, meta)
	}
	s.metaMu.Lock()
	hdr := encodeHeader(key, meta, e.metaCap, e.size)
	f, err := os.OpenFile(s.path(e.id), os.O_WRONLY, 0)
	if err == nil {
		// Metadata first, then the header that makes it count: a crash in
		// between leaves a header whose checksum fails, and Open drops the
		// file.
		if _, err = f.WriteAt(hdr[hdrSize+len(key):], int64(hdrSize+len(key))); err == nil {
			_, err = f.WriteAt(hdr[:hdrSize], 0)
		}
		f.Close()
	}
	s.metaMu.Unlock()
	if err != nil {
		return fmt.Errorf("store: set metadata of %s: %w", key, err)
	}
	s.mu.Lock()
	e.metaLen = len(meta)
	e.meta = meta // e is hot while h holds it, and goes to rest without it
	s.mu.Unlock()
	return nil
}

// rewrite stores h's body again with new metadata, for metadata that
// outgrew its region.
func (s *Store) rewrite(h *Handle, meta []byte) error {
	w, err := s.Create(h.Key(), meta, h.Size())
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, io.NewSectionReader(h, 0, h.Size())); err != nil {
		w.Abort()
		return fmt.Errorf("store: rewrite %s: %w", h.Key(), err)
	}
	return w.Commit()
}
