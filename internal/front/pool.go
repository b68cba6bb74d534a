package front

import (
	"errors"
	"net"
	"sync"
	"time"

	"shoal/internal/cluster"
	"shoal/internal/httpwire"
)

// nodeBufSize is the read buffer of one node connection: large enough for
// any sane response head plus the first part of the body, so a small
// response arrives in one read and leaves in one write.
const nodeBufSize = 32 << 10

// upstream is the data plane's state for one node.
type upstream struct {
	b    *cluster.Backend
	pool pool
	lim  limiter
}

func newUpstream(b *cluster.Backend, cfg *Config) *upstream {
	u := &upstream{b: b}
	u.pool.max = cfg.PoolSize
	u.pool.idleNanos = int64(cfg.PoolIdle)
	u.lim.max = cfg.MaxConn
	u.lim.queueMax = cfg.QueueLen
	return u
}

// nodeConn is one keep-alive connection to a node with its read buffer and
// parsed response head, reused across the requests it carries.
type nodeConn struct {
	c    net.Conn
	in   inbuf
	resp httpwire.ResponseHead
	// lastUsed is when the connection went back to the pool (UnixNano).
	lastUsed int64
	// rdl and wdl are the deadlines last set, to skip redundant sets.
	rdl, wdl deadline
}

// pool is a LIFO free list of idle node connections. LIFO keeps the hottest
// connections in use and lets the coldest age out; there is no goroutine per
// pooled connection: staleness is found by the request that uses it (and
// fixed by a fresh redial) or by the server's reaper.
type pool struct {
	mu        sync.Mutex
	idle      []*nodeConn
	max       int
	idleNanos int64
	closed    bool
}

// get pops the most recently used idle connection, closing any that idled
// past the limit (they sit below it, so once one is too old all are).
func (p *pool) get(now int64) *nodeConn {
	p.mu.Lock()
	n := len(p.idle)
	if n == 0 {
		p.mu.Unlock()
		return nil
	}
	nc := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	if now-nc.lastUsed <= p.idleNanos {
		p.mu.Unlock()
		return nc
	}
	stale := append([]*nodeConn(nil), p.idle...)
	clear(p.idle)
	p.idle = p.idle[:0]
	p.mu.Unlock()
	nc.c.Close()
	for _, s := range stale {
		s.c.Close()
	}
	return nil
}

// put returns nc to the pool, or closes it if the pool is full or closed.
func (p *pool) put(nc *nodeConn, now int64) {
	nc.lastUsed = now
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.max {
		p.mu.Unlock()
		nc.c.Close()
		return
	}
	p.idle = append(p.idle, nc)
	p.mu.Unlock()
}

// reap closes connections idle for longer than the limit.
func (p *pool) reap(now int64) {
	p.mu.Lock()
	k := 0
	for k < len(p.idle) && now-p.idle[k].lastUsed > p.idleNanos {
		k++
	}
	old := append([]*nodeConn(nil), p.idle[:k]...)
	n := copy(p.idle, p.idle[k:])
	clear(p.idle[n:])
	p.idle = p.idle[:n]
	p.mu.Unlock()
	for _, nc := range old {
		nc.c.Close()
	}
}

// drain closes every idle connection, keeping the pool open.
func (p *pool) drain() {
	p.mu.Lock()
	old := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, nc := range old {
		nc.c.Close()
	}
}

func (p *pool) closeAll() {
	p.mu.Lock()
	old := p.idle
	p.idle = nil
	p.closed = true
	p.mu.Unlock()
	for _, nc := range old {
		nc.c.Close()
	}
}

// Queue refusals.
var (
	errQueueFull    = errors.New("node queue full")
	errQueueTimeout = errors.New("node queue timeout")
)

// limiter caps a node's in-flight requests at max and queues the rest
// FIFO, at most queueMax of them (LARD's front-end queue: excess requests
// wait at the front instead of overloading a back-end). max 0 disables it.
type limiter struct {
	mu       sync.Mutex
	max      int
	queueMax int
	active   int
	waiters  []chan struct{}
}

// acquire takes a slot, waiting up to timeout; queued reports whether the
// request had to wait.
func (l *limiter) acquire(timeout time.Duration, done <-chan struct{}) (queued bool, err error) {
	if l.max <= 0 {
		return false, nil
	}
	l.mu.Lock()
	if l.active < l.max && len(l.waiters) == 0 {
		l.active++
		l.mu.Unlock()
		return false, nil
	}
	if len(l.waiters) >= l.queueMax {
		l.mu.Unlock()
		return false, errQueueFull
	}
	ch := make(chan struct{}, 1)
	l.waiters = append(l.waiters, ch)
	l.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return true, nil
	case <-t.C:
	case <-done:
	}
	l.mu.Lock()
	for i, w := range l.waiters {
		if w == ch {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			l.mu.Unlock()
			return true, errQueueTimeout
		}
	}
	l.mu.Unlock()
	// A release handed us the slot while we were timing out: keep it.
	<-ch
	return true, nil
}

// release frees a slot, handing it straight to the oldest waiter if any.
func (l *limiter) release() {
	if l.max <= 0 {
		return
	}
	l.mu.Lock()
	if len(l.waiters) > 0 {
		ch := l.waiters[0]
		l.waiters[0] = nil
		l.waiters = l.waiters[1:]
		l.mu.Unlock()
		ch <- struct{}{}
		return
	}
	l.active--
	l.mu.Unlock()
}
