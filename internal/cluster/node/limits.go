package node

import (
	"errors"
	"slices"
	"time"
)

// DefaultMaxConns derives the default of Config.MaxConns from the
// process's descriptor limit nofile: a reserve of nofile/8, between 32 and
// 1024, for listeners, logs and the handoff socket, and half of the rest,
// because a connection streaming a file holds the file's descriptor too.
// The same rule as the front's default (front.DefaultMaxClientConns).
func DefaultMaxConns(nofile int) int {
	reserve := min(max(nofile/8, 32), 1024)
	return max((nofile-reserve)/2, 1)
}

// errConnLimit refuses a connection at Config.MaxConns with none idle.
var errConnLimit = errors.New("node: connection limit reached")

// shedMinIdle is the least time a connection must have been idle to be
// closed to make room: one just accepted or just answered is idle only
// until its goroutine reads the request usually already there.
const shedMinIdle = int64(20 * time.Millisecond)

// makeRoom closes up to n of the connections idle the longest (idle for
// at least shedMinIdle) and reports how many it closed. s.mu is held.
func (s *Server) makeRoom(n int) int {
	old := time.Now().UnixNano() - shedMinIdle
	cand := s.shedCand[:0]
	for c := range s.conns {
		if c.state.Load() == stIdle {
			if at := c.since.Load(); at <= old {
				cand = append(cand, idleConn{c, at})
			}
		}
	}
	if len(cand) > n {
		slices.SortFunc(cand, func(a, b idleConn) int { return int(min(max(a.at-b.at, -1), 1)) })
		cand = cand[:n]
	}
	k := 0
	for _, ic := range cand {
		if ic.c.state.CompareAndSwap(stIdle, stClosed) {
			ic.c.nc.Close()
			k++
		}
	}
	clear(cand)
	s.shedCand = cand[:0]
	s.shed.Add(int64(k))
	return k
}

// idleConn is a candidate for makeRoom.
type idleConn struct {
	c  *conn
	at int64
}
