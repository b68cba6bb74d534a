//go:build linux

package handoff

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFDClientSocketNotWatchedForWriteSpace: an epoll instance of the
// process watches an FDClient's socket for input (the reader waits on it),
// and none for write space: a unix socket signals write space each time
// its peer dequeues a record, which woke an idle front once per passed
// connection while Go's poller (which asks for EPOLLOUT on every socket)
// watched it.
func TestFDClientSocketNotWatchedForWriteSpace(t *testing.T) {
	sock, ul := listenPacket(t)
	c := NewFDClient(FDClientConfig{Path: sock})
	defer c.Close()
	if err := c.SendMsg(FDHeader{Kind: FDTable}, []byte("x")); err != nil { // dials
		t.Fatal(err)
	}
	peer, err := ul.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	c.mu.Lock()
	uc := c.uc
	c.mu.Unlock()
	var ino uint64
	uc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if unix.Fstat(int(fd), &st) == nil {
			ino = st.Ino
		}
	})
	if ino == 0 {
		t.Fatal("no socket inode")
	}
	in, out := epollWatches(t, ino)
	if !in {
		t.Error("no epoll watches the socket for input: the reader could not wait")
	}
	if out {
		t.Error("an epoll watches the socket for write space (EPOLLOUT)")
	}
}

// epollWatches reports whether an epoll instance of this process watches
// the file with inode ino for input and for output, from
// /proc/self/fdinfo.
func epollWatches(t *testing.T, ino uint64) (in, out bool) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l != "anon_inode:[eventpoll]" {
			continue
		}
		f, err := os.Open("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// tfd:        4 events: 8000001d data:    4  pos:0 ino:9bb32a sdev:9
			fields := strings.Fields(sc.Text())
			var ev, fino uint64
			for i, fl := range fields {
				switch {
				case fl == "events:" && i+1 < len(fields):
					ev, _ = strconv.ParseUint(fields[i+1], 16, 32)
				case strings.HasPrefix(fl, "ino:"):
					fino, _ = strconv.ParseUint(fl[4:], 16, 64)
				}
			}
			if len(fields) > 0 && fields[0] == "tfd:" && fino == ino {
				in = in || ev&unix.EPOLLIN != 0
				out = out || ev&unix.EPOLLOUT != 0
			}
		}
		f.Close()
	}
	return in, out
}
