package store

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// A stored body's file, Dir/o/XX/ID (ID the entry's 16-hex-digit number,
// XX its low byte), is
//
//	offset 0   "shoalst1"
//	       8   CRC-32C of bytes 12..32, the key and the metadata
//	      12   key length (uint32, little-endian)
//	      16   metadata length (uint32)
//	      20   metadata region (uint32): room for metadata up to this size
//	      24   body length (uint64)
//	      32   key, then the metadata region, then the body
//
// The metadata region has room to spare (metaRoom), so new metadata of
// about the same size (a revalidated response's head) is written in place
// without touching the body. Files are written under Dir/tmp and renamed
// into place at commit, so a file in Dir/o is complete unless the machine
// crashed while writing it back; Open checks each header and length and
// deletes what does not check. Nothing is fsynced: the disk tier is a
// cache, and losing an entry to a crash costs one fetch.

const (
	fileMagic = "shoalst1"
	hdrSize   = 32
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// metaRoom is the metadata region for metadata of n bytes: half as much
// again (at least 256 bytes), in 512-byte steps, within MaxMeta.
func metaRoom(n int) int {
	r := (n + max(256, n/2) + 511) / 512 * 512
	return min(r, MaxMeta)
}

// encodeHeader returns the header, key and metadata of a file (the
// region's padding is not included).
func encodeHeader(key string, meta []byte, room int, body int64) []byte {
	b := make([]byte, hdrSize, hdrSize+len(key)+len(meta))
	copy(b, fileMagic)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(key)))
	binary.LittleEndian.PutUint32(b[16:], uint32(len(meta)))
	binary.LittleEndian.PutUint32(b[20:], uint32(room))
	binary.LittleEndian.PutUint64(b[24:], uint64(body))
	b = append(append(b, key...), meta...)
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[12:], crcTable))
	return b
}

// fileHeader is a decoded header.
type fileHeader struct {
	key     string
	meta    []byte
	room    int
	body    int64
	bodyOff int64
}

var errBadHeader = errors.New("bad header")

// readHeader reads and checks f's header.
func readHeader(f *os.File) (fileHeader, error) {
	var fh fileHeader
	var h [hdrSize]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		return fh, err
	}
	kl, ml := int(binary.LittleEndian.Uint32(h[12:])), int(binary.LittleEndian.Uint32(h[16:]))
	room, body := int(binary.LittleEndian.Uint32(h[20:])), int64(binary.LittleEndian.Uint64(h[24:]))
	if string(h[:8]) != fileMagic || kl == 0 || kl > MaxKey || ml > room || room > MaxMeta || body < 0 {
		return fh, errBadHeader
	}
	b := make([]byte, hdrSize+kl+ml)
	copy(b, h[:])
	if _, err := f.ReadAt(b[hdrSize:], hdrSize); err != nil {
		return fh, err
	}
	if crc32.Checksum(b[12:], crcTable) != binary.LittleEndian.Uint32(h[8:]) {
		return fh, errBadHeader
	}
	fh.key = string(b[hdrSize : hdrSize+kl])
	fh.meta = b[hdrSize+kl:]
	fh.room, fh.body = room, body
	fh.bodyOff = int64(hdrSize + kl + room)
	return fh, nil
}

// diskSize is what a stored entry's file takes on disk, in 4 KiB blocks.
func diskSize(bodyOff, body int64) int64 {
	return (bodyOff + body + blockSize - 1) / blockSize * blockSize
}

// path is the file of stored entry id.
func (s *Store) path(id uint64) string {
	name := fmt.Sprintf("%016x", id)
	return filepath.Join(s.cfg.Dir, "o", name[14:], name)
}

// openStored opens e's file for its handles. s.mu is held: an open of a
// file in a folder the store uses is a metadata lookup, not a read.
func (s *Store) openStored(e *entry) error {
	if e.kind != kindStored || e.id == 0 {
		return fmt.Errorf("store: %s has no file", e.key)
	}
	f, err := os.Open(s.path(e.id))
	if err != nil {
		return err
	}
	e.f, e.fd = f, int(f.Fd())
	return nil
}

// loadMeta reads a stored entry's metadata from its file, for a handle
// (the handle holds e, so e.f is open), and keeps it while e is in the
// memory tier.
func (s *Store) loadMeta(e *entry) []byte {
	s.metaMu.Lock()
	fh, err := readHeader(e.f)
	s.metaMu.Unlock()
	if err != nil {
		s.cfg.Logger.Warn("store: read metadata", "key", e.key, "err", err)
		return []byte{}
	}
	s.mu.Lock()
	if e.inMem && e.meta == nil {
		e.meta = fh.meta
	}
	s.mu.Unlock()
	return fh.meta
}

// load prepares Dir and reads the disk tier a previous run left: every
// file whose header and length check is indexed (the newest file of a key
// wins), oldest first in the disk tier's order; the others, and
// unfinished writes in Dir/tmp, are deleted.
func (s *Store) load() error {
	tmp := filepath.Join(s.cfg.Dir, "tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("store: clear %s: %w", tmp, err)
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(s.cfg.Dir, "o"), 0o700); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(s.cfg.Dir, "o", "*", "*"))
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	var found []loaded
	for _, p := range files {
		if l, ok := s.loadFile(p); ok {
			found = append(found, l)
		}
	}
	slices.SortFunc(found, func(a, b loaded) int { return cmp.Compare(a.id, b.id) })
	s.mu.Lock()
	for _, l := range found {
		s.displace(l.hash) // an older file of the key
		s.nextID = max(s.nextID, l.id)
		e := &entry{key: l.key, hash: l.hash, kind: kindStored, id: l.id, first: -1}
		if !s.record(e, l.blocks) {
			s.gone = append(s.gone, goneEntry{unlink: s.path(l.id)})
		}
	}
	s.unlock() // deletes what was dropped
	return nil
}

// loaded is a stored file found by load.
type loaded struct {
	key    string
	hash   uint64
	id     uint64
	blocks int64
}

// loadFile reads one stored file's header; a file that does not check is
// deleted.
func (s *Store) loadFile(p string) (loaded, bool) {
	id, err := strconv.ParseUint(filepath.Base(p), 16, 64)
	if err != nil || id == 0 {
		return loaded{}, false // not ours
	}
	f, err := os.Open(p)
	if err != nil {
		s.cfg.Logger.Warn("store: open stored file", "file", p, "err", err)
		return loaded{}, false
	}
	defer f.Close()
	fh, err := readHeader(f)
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if err == nil && fi.Size() != fh.bodyOff+fh.body {
		err = fmt.Errorf("%d bytes, header says %d", fi.Size(), fh.bodyOff+fh.body)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = errBadHeader
		}
		s.cfg.Logger.Warn("store: dropping a stored file that does not check", "file", p, "err", err)
		os.Remove(p)
		return loaded{}, false
	}
	return loaded{key: fh.key, hash: s.hash(fh.key), id: id, blocks: diskSize(fh.bodyOff, fh.body) / blockSize}, true
}

// peekFile reads the key and body size of stored file id (Walk's), false
// when it is gone.
func (s *Store) peekFile(id uint64) (string, int64, bool) {
	f, err := os.Open(s.path(id))
	if err != nil {
		return "", 0, false
	}
	defer f.Close()
	s.metaMu.Lock()
	fh, err := readHeader(f)
	s.metaMu.Unlock()
	return fh.key, fh.body, err == nil
}

// keyOf reads the key from a stored file's header, "" when it cannot.
func (s *Store) keyOf(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	fh, err := readHeader(f)
	if err != nil {
		return ""
	}
	return fh.key
}
