package node

import (
	"io"
	"os"
	"time"
)

// sendFile flushes the pending head and streams length bytes of f from
// offset with sendfile(2), then closes f: io.Copy from an *os.File into a *net.TCPConn
// uses it (checked with strace). A short copy (the file shrank) closes the
// connection, since the Content-Length already promised more.
//
// Tried and measured worse: issuing sendfile as a raw syscall on the
// socket's descriptor (to keep the runtime from handing the P to another
// thread during a ~150 µs 1 MB copy) used more CPU per request and tripled
// context switches, so the runtime's path stays.
func (c *conn) sendFile(f *os.File, offset, length int64) bool {
	defer f.Close()
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			c.flush()
			return false
		}
	}
	if c.flush() != nil {
		return false
	}
	for length > 0 {
		chunk := min(length, sendChunk)
		c.lr = io.LimitedReader{R: f, N: chunk}
		n, err := io.Copy(c.nc, &c.lr)
		c.nbytes += n
		length -= n
		c.since.Store(time.Now().UnixNano()) // progress, for WriteTimeout
		if err != nil || n < chunk {
			return false
		}
	}
	c.lr = io.LimitedReader{}
	return true
}
