package sim

import (
	"fmt"
	"io"
)

// Keep-alive connections (Config.ConnRequests = K > 1). In throughput mode
// the window's slots are client connections, as a closed-loop load
// generator's are: a connection takes the next K accesses of the trace and
// sends them one after the other, each when the one before has completed,
// then closes, and a new connection takes the next K. Window connections
// are open at all times, which is what a policy counting connections (tbccrd)
// must see to decide as it does live. In latency mode requests arrive at
// their trace times, so K consecutive accesses simply share a connection.

// connState is a keep-alive connection in the simulator.
type connState struct {
	node  int32    // the node its last dispatched request went to, -1 before
	queue []Access // throughput mode: its accesses not yet admitted
	// latency mode: its requests admitted and completed, and whether its
	// last one has been admitted.
	admitted, done int
	last           bool
}

// next returns the next access to admit and its connection: prev's next
// one when prev has more, else the first of a new connection. io.EOF at the
// end of the source.
func (s *sim) next(prev uint64) (Access, uint64, error) {
	k := s.cfg.ConnRequests
	if cs := s.conns[prev]; prev != 0 && cs != nil && len(cs.queue) > 0 {
		a := cs.queue[0]
		cs.queue = cs.queue[1:]
		return a, prev, nil
	}
	if s.srcDone {
		return Access{}, 0, io.EOF
	}
	a, err := s.src.Next()
	if err == io.EOF {
		s.srcDone = true
	}
	if err != nil {
		return Access{}, 0, err
	}
	s.admitted++
	if k <= 1 {
		s.conn++
		return a, s.conn, nil
	}
	if s.conns == nil {
		s.conns = map[uint64]*connState{}
	}
	if s.cfg.TimeScale > 0 {
		return a, s.grouped(int64(k)), nil
	}
	s.conn++
	cs := &connState{node: -1}
	for len(cs.queue) < k-1 {
		b, err := s.src.Next()
		if err == io.EOF {
			s.srcDone = true
			break
		}
		if err != nil {
			return Access{}, 0, fmt.Errorf("sim: %w", err)
		}
		cs.queue = append(cs.queue, b)
	}
	s.conns[s.conn] = cs
	return a, s.conn, nil
}

// grouped is the latency-mode connection of the access just admitted: the
// same for K consecutive accesses.
func (s *sim) grouped(k int64) uint64 {
	id := uint64((s.admitted-1)/k) + 1
	cs := s.conns[id]
	if cs == nil {
		cs = &connState{node: -1}
		s.conns[id] = cs
	}
	cs.admitted++
	cs.last = s.admitted%k == 0
	return id
}

// connDone records that a request on conn completed and reports whether
// the connection is now closed.
func (s *sim) connDone(conn uint64) bool {
	cs := s.conns[conn]
	if cs == nil {
		return true // one request per connection
	}
	if s.cfg.TimeScale == 0 {
		if len(cs.queue) > 0 {
			return false
		}
	} else if cs.done++; cs.done < cs.admitted || !cs.last && !s.srcDone {
		return false
	}
	delete(s.conns, conn)
	return true
}
