package front

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"shoal/internal/base/httpwire"
	"shoal/internal/base/rawio"
	"shoal/internal/cluster/control"
)

// nodeBufSize is the read buffer of one node connection: large enough for
// any sane response head plus the first part of the body, so a small
// response arrives in one read and leaves in one write.
const nodeBufSize = 32 << 10

// upstream is the data plane's state for one node.
type upstream struct {
	b    *control.Backend
	pool pool
	lim  limiter
	// pmu guards open, the connection whose batched write requests may
	// still join (pipeline.go), and that connection's wbuf and pq.
	pmu  sync.Mutex
	open *nodeConn
}

func newUpstream(b *control.Backend, cfg *Config) *upstream {
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

	// State of sendAwait (see there); step is rawStep bound once, so the
	// hot path does not allocate a closure.
	raw     syscall.RawConn
	step    func(fd uintptr) bool
	wbuf    []byte
	wn      int
	werr    error
	rn      int
	rerr    error
	phase   int8
	awaited bool
	// fd is the connection's descriptor, for the batcher's writes; batch
	// the batcher of the request in flight (nil: write inline); flushed
	// its progress (flushIdle, flushPending, flushDone, flushKicked).
	fd      int
	batch   *batcher
	flushed atomic.Int32
	// flushSig is signalled after each flush of a queued head, so a waiter
	// that saw flushPending parks instead of spinning: a spinning waiter
	// with one P starved the batcher (back from its write, waiting for a
	// P) for seconds. Buffered 1; a stale signal only makes the waiter
	// check flushed again.
	flushSig chan struct{}

	// peek is peekStep bound once, quiet its last answer (see quiet).
	peek     func(fd uintptr)
	quietNow bool
	peekBuf  [1]byte
	// echoes: the node has answered on this connection with the token of
	// the request (seqHeader), so a replayable request may skip the peek;
	// unpeeked: the request in flight did (see fit and answered).
	echoes, unpeeked bool

	// Pipelining (pipeline.go): u is the connection's node; lead asks the
	// request being sent to open the connection for joining, pbuf keeps
	// the joined heads' buffer between uses; piped: requests joined this
	// use, pq those still waiting for their turn, broken: the connection
	// failed and they go elsewhere.
	u             *upstream
	lead          bool
	pbuf          []byte
	piped, broken bool
	pq            []*clientConn
}

// newNodeConn wraps a fresh connection to a node.
func newNodeConn(c net.Conn) *nodeConn {
	nc := &nodeConn{c: c, in: inbuf{b: make([]byte, nodeBufSize)}, flushSig: make(chan struct{}, 1)}
	if tc, ok := c.(*net.TCPConn); ok {
		if raw, err := tc.SyscallConn(); err == nil {
			nc.raw = raw
			nc.step = nc.rawStep
			nc.peek = nc.peekStep
			raw.Control(func(fd uintptr) { nc.fd = int(fd) })
		}
	}
	return nc
}

// sendAwait writes a request head b and waits for the node's answer to
// become readable, then reads it into nc.in (the result is picked up by
// readResponseHead through nc.awaited). Go's ordinary Read first tries the
// read, gets EAGAIN (the node cannot have answered a request just sent),
// parks and reads again: one wasted system call per request, a tenth of
// the relay's cost here. Doing the write inside RawConn.Read, after the
// poller's read state was reset, lets the first read wait for readiness
// instead, with no readiness edge lost: nothing can arrive for a request
// not yet written. (A node that closed the pooled connection earlier
// answers the write with a reset, which wakes the wait.) If the write does
// not complete at once, the rest goes the ordinary way.
func (nc *nodeConn) sendAwait(b []byte, batch *batcher) error {
	nc.wbuf, nc.wn, nc.werr, nc.rn, nc.rerr, nc.phase, nc.awaited = b, 0, nil, 0, nil, 0, false
	nc.batch = batch
	nc.flushed.Store(flushIdle) // stays so if Read fails before calling rawStep
	err := nc.raw.Read(nc.step)
	if batch != nil {
		// The wait can end before the batcher wrote (a reset from a node
		// that had closed the connection): it must be done with nc.wbuf
		// and the descriptor before they are reused or closed.
		for nc.flushed.Load() == flushPending {
			<-nc.flushSig
		}
		if nc.flushed.Load() == flushKicked {
			nc.rdl = deadline{} // the kick moved the read deadline
			nc.c.SetReadDeadline(time.Time{})
			err = nil
		}
		nc.batch = nil
	}
	b = nc.wbuf // with the heads that joined it (pipeline.go)
	nc.wbuf = nil
	if nc.lead {
		nc.pbuf, nc.lead = b[:0], false
	}
	if nc.werr != nil {
		return nc.werr
	}
	if nc.wn < len(b) {
		if err != nil {
			return err
		}
		_, err = nc.c.Write(b[nc.wn:])
		return err
	}
	nc.awaited = true
	if err != nil && nc.rerr == nil {
		nc.rerr = err // deadline or close while waiting
	}
	return nil
}

// rawStep is sendAwait's RawConn.Read callback: first call writes, later
// calls read once the poller reports the socket readable.
func (nc *nodeConn) rawStep(fd uintptr) bool {
	if nc.phase == 0 {
		nc.phase = 1
		if nc.batch != nil {
			nc.flushed.Store(flushPending)
			if nc.lead {
				nc.openPipe()
			}
			nc.batch.add(nc)
			return false // wait for readability
		}
		m, again, err := rawio.TryWrite(int(fd), nc.wbuf[nc.wn:])
		nc.wn += m
		nc.werr = err
		// Wait for readability once all is written; a full socket or an
		// error ends the step (sendAwait writes the rest the ordinary way).
		return again || err != nil
	}
	m, again, err := rawio.TryRead(int(fd), nc.in.b[nc.in.w:])
	if again {
		return false
	}
	nc.in.w += m
	nc.rn, nc.rerr = m, err
	return true
}

// quiet reports whether a pooled connection is fit to carry a request:
// nothing buffered, nothing readable and no end of stream on the socket. A
// node that sent anything while the connection was idle — the rest of a
// body it framed shorter than it sent, an answer to a request smuggled past
// the front, a close — has left bytes that would be read as the answer to
// the next request, so such a connection is closed, never reused.
// nginx's upstream keepalive and HAProxy's idle connections do the
// same. One non-blocking recv(MSG_PEEK) per reused connection.
func (nc *nodeConn) quiet() bool {
	if nc.in.len() != 0 {
		return false
	}
	if nc.raw == nil {
		return true
	}
	nc.quietNow = false
	if nc.raw.Control(nc.peek) != nil {
		return false
	}
	return nc.quietNow
}

// fit reports whether a pooled connection may carry the next request. A
// node that echoes the request's token (seqHeader; shoal's nodes do) shows
// in the answer itself whether the answer is the request's: a replayable
// request then skips quiet's peek, one system call a request, and an answer
// without its token closes the connection and the request goes again on a
// fresh one (answered). Requests with a body, which cannot be replayed, and
// nodes that do not echo (nginx, say) are peeked first.
func (nc *nodeConn) fit(replayable bool) bool {
	nc.unpeeked = nc.echoes && replayable && nc.in.len() == 0
	return nc.unpeeked || nc.quiet()
}

// answered reports whether the response head in nc.resp answers the
// request sent with token tok, and learns whether the node echoes. An
// answer carrying another token answers another request (bytes the node
// sent while the connection idled); one without a token is only trusted
// when the connection was fresh or peeked quiet before the request went.
func (nc *nodeConn) answered(tok uint64) bool {
	v, ok := echoOf(nc.resp.Headers)
	switch {
	case ok && v == tok:
		nc.echoes = true
		return true
	case ok, nc.unpeeked:
		return false
	}
	nc.echoes = false
	return true
}

// peekStep is quiet's RawConn.Control callback.
func (nc *nodeConn) peekStep(fd uintptr) {
	nc.quietNow = rawQuiet(int(fd), nc.peekBuf[:])
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
	closeConns(old)
}

// drain closes every idle connection, keeping the pool open.
func (p *pool) drain() { p.closeIdle(false) }

// closeAll closes every idle connection and the pool.
func (p *pool) closeAll() { p.closeIdle(true) }

func (p *pool) closeIdle(closePool bool) {
	p.mu.Lock()
	old := p.idle
	p.idle = nil
	p.closed = p.closed || closePool
	p.mu.Unlock()
	closeConns(old)
}

func closeConns(ncs []*nodeConn) {
	for _, nc := range ncs {
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
