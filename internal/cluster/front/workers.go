package front

import (
	"sync"
	"time"
)

// workers runs stream handlers (HTTP/2 and HTTP/3 requests) on goroutines
// kept from one stream to the next. A new goroutine per stream starts on
// the smallest stack and grew it for every request: runtime.morestack and
// copystack were a large share of the front's CPU under h2load
// (docs/benchmarks.md). A finished handler parks on its channel
// for the next stream; at most maxIdleWorkers wait, and those idle for
// longer than Config.PoolIdle end at the next reap, so a burst leaves no
// lasting crowd of goroutines behind.
type workers struct {
	mu   sync.Mutex
	idle []*worker // LIFO: the most recently used (warmest) first
}

// maxIdleWorkers bounds the parked handler goroutines.
const maxIdleWorkers = 1024

// task is a stream handler's work.
type task interface{ run() }

type worker struct {
	ch   chan task // nil: end
	last int64     // when it went idle (UnixNano)
}

// do runs t on an idle worker, or on a new one.
func (p *workers) do(t task) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.ch <- t
		return
	}
	p.mu.Unlock()
	w := &worker{ch: make(chan task, 1)}
	w.ch <- t
	go p.loop(w)
}

func (p *workers) loop(w *worker) {
	for t := range w.ch {
		if t == nil {
			return
		}
		t.run()
		w.last = time.Now().UnixNano()
		p.mu.Lock()
		if len(p.idle) >= maxIdleWorkers {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, w)
		p.mu.Unlock()
	}
}

// reap ends the workers idle since before old (UnixNano).
func (p *workers) reap(old int64) {
	p.mu.Lock()
	k := 0
	for k < len(p.idle) && p.idle[k].last < old {
		p.idle[k].ch <- nil
		k++
	}
	n := copy(p.idle, p.idle[k:])
	clear(p.idle[n:])
	p.idle = p.idle[:n]
	p.mu.Unlock()
}
