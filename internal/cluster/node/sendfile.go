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
	if offset == 0 { // just opened: already there, spare the lseek
		return c.copyFile(f, length)
	}
	return c.sendPart(f, offset, length)
}

// copyFile flushes the pending output and copies length bytes of f from its
// current offset to the connection in sendChunk steps, recording progress
// for WriteTimeout after each. It reports whether all of them went out: a
// short copy means the file shrank under a promised length.
func (c *conn) copyFile(f *os.File, length int64) bool {
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
