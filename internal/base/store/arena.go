package store

import (
	"fmt"
	"io"
	"os"
)

// blockSize is the arena's unit and the page size the memory tier counts
// in: a body occupies whole blocks, as it would whole pages of the page
// cache.
const blockSize = 4096

// arena holds inline bodies off the Go heap: one anonymous mapping
// reserved at the memory tier's size (pages are only charged once
// touched), cut in 4 KiB blocks. A body takes as many blocks as it needs,
// chained through next, so any free block fits any body and nothing
// fragments; a freed block is returned to the kernel (madvise DONTNEED),
// so the arena's resident size is what its bodies use. Written by hand:
// the pure-Go arenas around (and the experimental GOEXPERIMENT=arenas)
// allocate from the Go heap or free only whole regions.
type arena struct {
	mem      []byte  // the mapping
	next     []int32 // next block of the same body, -1 at the end
	freeHead int32   // first free block already used once, -1 none
	top      int32   // blocks [top, len(next)) were never used
	used     int     // blocks holding bodies
}

func newArena(bytes int64) (*arena, error) {
	n := max((bytes+blockSize-1)/blockSize, 1)
	mem, err := mapAnon(int(n * blockSize))
	if err != nil {
		return nil, fmt.Errorf("arena of %d bytes: %w", n*blockSize, err)
	}
	a := &arena{mem: mem, next: make([]int32, n), freeHead: -1}
	return a, nil
}

// blocksFor is the number of blocks a body of size bytes takes.
func blocksFor(size int64) int { return int((size + blockSize - 1) / blockSize) }

// alloc chains n free blocks and returns the first, or false when fewer
// than n are free (nothing is taken then).
func (a *arena) alloc(n int) (int32, bool) {
	if n <= 0 || a.used+n > len(a.next) {
		return -1, false
	}
	first, last := int32(-1), int32(-1)
	for range n {
		var b int32
		if a.freeHead >= 0 {
			b, a.freeHead = a.freeHead, a.next[a.freeHead]
		} else {
			b = a.top
			a.top++
		}
		a.next[b] = -1
		if last >= 0 {
			a.next[last] = b
		} else {
			first = b
		}
		last = b
	}
	a.used += n
	return first, true
}

// free returns a body's blocks, and their pages to the kernel.
func (a *arena) free(first int32) {
	for b := first; b >= 0; {
		nb := a.next[b]
		releasePages(a.block(b))
		a.next[b], a.freeHead = a.freeHead, b
		a.used--
		b = nb
	}
}

func (a *arena) block(b int32) []byte {
	o := int(b) * blockSize
	return a.mem[o : o+blockSize : o+blockSize]
}

// appendRange appends n bytes from off of the body starting at first.
func (a *arena) appendRange(dst []byte, first int32, off, n int64) []byte {
	b := first
	for off >= blockSize {
		b, off = a.next[b], off-blockSize
	}
	for n > 0 {
		chunk := min(n, blockSize-off)
		dst = append(dst, a.block(b)[off:off+chunk]...)
		n -= chunk
		off = 0
		b = a.next[b]
	}
	return dst
}

// writeRange writes n bytes from off of the body starting at first to w,
// block by block.
func (a *arena) writeRange(w io.Writer, first int32, off, n int64) (int64, error) {
	b := first
	for off >= blockSize {
		b, off = a.next[b], off-blockSize
	}
	var sent int64
	for n > 0 {
		chunk := min(n, blockSize-off)
		m, err := w.Write(a.block(b)[off : off+chunk])
		sent += int64(m)
		if err != nil {
			return sent, err
		}
		n -= chunk
		off = 0
		b = a.next[b]
	}
	return sent, nil
}

// readFrom fills size bytes of the chain starting at first, from at on,
// with f's bytes from off.
func (a *arena) readFrom(first int32, at, size int64, f *os.File, off int64) error {
	b := first
	for at >= blockSize {
		b, at = a.next[b], at-blockSize
	}
	for ; size > 0; b = a.next[b] {
		chunk := min(size, blockSize-at)
		if _, err := f.ReadAt(a.block(b)[at:at+chunk], off); err != nil {
			return err
		}
		off += chunk
		size -= chunk
		at = 0
	}
	return nil
}

// copyIn copies p into the chain starting at first, from at on.
func (a *arena) copyIn(first int32, at int64, p []byte) {
	b := first
	for at >= blockSize {
		b, at = a.next[b], at-blockSize
	}
	for ; len(p) > 0; b = a.next[b] {
		p = p[copy(a.block(b)[at:], p):]
		at = 0
	}
}
