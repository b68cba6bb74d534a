package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
)

// maxLine bounds one log line; longer lines are counted as malformed and
// skipped (real CLF lines are well under 1 KB).
const maxLine = 64 << 10

// Source is anything that yields Records until io.EOF: a Reader over a log
// file or a synthetic Gen. The simulator and the load generator consume it.
type Source interface {
	Next() (Record, error)
}

// Reader streams Records from an access log. It is not safe for concurrent use.
type Reader struct {
	br        *bufio.Reader
	closers   []io.Closer
	name      string
	format    Format
	p         parser
	in        interner
	line      int
	malformed int
	noRequest int
}

// NewReader reads log lines from r in format f (Auto detects it from the first
// line that parses). The caller keeps ownership of r; Close is a no-op for it.
func NewReader(r io.Reader, f Format) *Reader {
	rd := &Reader{br: bufio.NewReaderSize(r, maxLine), format: f, name: "trace"}
	rd.p.in = &rd.in
	return rd
}

// Open opens a log file, plain or gzip (detected by the 0x1f 0x8b magic bytes,
// not by the file name), with the format detected from its first parsable line.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	br := bufio.NewReaderSize(f, 256<<10)
	var src io.Reader = br
	var closers []io.Closer
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("trace %s: gzip: %w", path, err)
		}
		src = zr
		closers = append(closers, zr)
	}
	r := NewReader(src, Auto)
	r.name = path
	r.closers = append(closers, f)
	return r, nil
}

// Next returns the next well-formed Record, skipping (and counting) malformed
// lines. It returns io.EOF at the end of the input and a wrapped error if the
// underlying reader fails (for instance a truncated gzip stream).
func (r *Reader) Next() (Record, error) {
	for {
		line, err := r.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Over-long line: discard up to its end and count it.
			r.line++
			r.malformed++
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.br.ReadSlice('\n')
			}
			if err == io.EOF {
				return Record{}, io.EOF
			}
			if err != nil {
				return Record{}, fmt.Errorf("%s: line %d: %w", r.name, r.line, err)
			}
			continue
		}
		if len(line) == 0 {
			if err == nil || err == io.EOF {
				return Record{}, io.EOF
			}
			return Record{}, fmt.Errorf("%s: line %d: %w", r.name, r.line+1, err)
		}
		r.line++
		if err != nil && err != io.EOF {
			return Record{}, fmt.Errorf("%s: line %d: %w", r.name, r.line, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue // blank lines are not records and not errors
		}
		rec, perr := r.p.parse(line, r.format)
		if perr == errNoRequest {
			r.noRequest++
			continue
		}
		if perr != nil {
			r.malformed++
			continue
		}
		if r.format == Auto {
			if _, cerr := r.p.parseCLF(bytes.TrimRight(line, "\r\n \t")); cerr == nil {
				r.format = CLF
			} else {
				r.format = EPA
			}
		}
		return rec, nil
	}
}

// Malformed returns how many non-blank lines were skipped as unparsable so far.
func (r *Reader) Malformed() int { return r.malformed }

// NoRequest returns how many lines were skipped for logging an answer to a
// connection that sent no request (request "-"): not requests, and not
// malformed either.
func (r *Reader) NoRequest() int { return r.noRequest }

// Lines returns how many lines were read so far (including blank and malformed ones).
func (r *Reader) Lines() int { return r.line }

// Format returns the format in use: the one given to NewReader, or the one
// detected from the first parsable line (Auto until then).
func (r *Reader) Format() Format { return r.format }

// Close releases the file and gzip stream opened by Open.
func (r *Reader) Close() error {
	var first error
	for _, c := range r.closers {
		if err := c.Close(); err != nil && first == nil {
			first = fmt.Errorf("%s: close: %w", r.name, err)
		}
	}
	r.closers = nil
	return first
}

// Sizes reads the log at path and returns each URL's object size, taken as the
// largest byte count of any 200 response for it. Log sizes are response sizes,
// not file sizes: 304s and aborted transfers log fewer bytes (often 0 or "-"),
// so only full 200 responses count and the largest one is the best estimate of
// the file (see the traces' README). Callers replaying a trace through a cache
// make this first pass, then a second pass with the sizes known.
// URLs never answered with a 200 are absent from the map.
func Sizes(path string) (map[string]int64, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	sizes := make(map[string]int64)
	for n := 0; ; n++ {
		rec, err := r.Next()
		if err == io.EOF {
			if n == 0 {
				return nil, fmt.Errorf("%s: %w", path, ErrNoRecords)
			}
			return sizes, nil
		}
		if err != nil {
			return nil, fmt.Errorf("sizes: %w", err)
		}
		if key := rec.Key(); rec.Status == 200 && rec.Bytes > sizes[key] {
			sizes[key] = rec.Bytes
		}
	}
}

// ErrNoRecords says that a whole file held no access-log line: it is most
// likely not a log at all (a README, a binary), and a table of zeros would
// hide that.
var ErrNoRecords = errors.New("no line is an access-log record (want Common Log Format, combined or EPA)")

// interner is a fixed-size, direct-mapped table of recently seen strings: a
// repeated host or URL costs a hash and a compare instead of an allocation,
// and memory stays bounded whatever the trace length.
type interner struct {
	seed  maphash.Seed
	init  bool
	table [4096]string
}

func (in *interner) get(b []byte) string {
	if !in.init {
		in.seed = maphash.MakeSeed()
		in.init = true
	}
	i := maphash.Bytes(in.seed, b) & uint64(len(in.table)-1)
	if s := in.table[i]; s == string(b) {
		return s
	}
	s := string(b)
	in.table[i] = s
	return s
}
