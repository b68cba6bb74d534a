package sim

// event is one scheduled happening in virtual time. Events are plain values in
// a typed heap (no interface boxing, no allocation per event once the heap's
// slice has grown); the request an event belongs to is an index into the
// simulator's request pool.
type event struct {
	t    int64  // virtual time, ns
	seq  uint64 // tie-break: equal times fire in scheduling order
	kind uint8
	req  int32
}

// eventQueue is a min-queue of events ordered by (t, seq), so the simulation
// is deterministic: two events at the same instant always fire in the order
// they were scheduled. It is a 4-ary heap (shallower than a binary one: fewer
// cache lines touched per pop) plus a one-event fast slot that holds an
// event earlier than everything in the heap: the common "schedule the very
// next event" case (a front-end job finishing before any node does) then
// costs one comparison instead of a sift up and a sift down.
type eventQueue struct {
	h    []event
	fast event
	has  bool // fast holds an event
	seq  uint64
}

func (e *event) less(o *event) bool {
	return e.t < o.t || (e.t == o.t && e.seq < o.seq)
}

// push schedules an event of kind for request req at time t.
func (q *eventQueue) push(t int64, kind uint8, req int32) {
	q.seq++
	ev := event{t: t, seq: q.seq, kind: kind, req: req}
	if q.has {
		if !ev.less(&q.fast) {
			q.heapPush(ev)
			return
		}
		q.heapPush(q.fast)
		q.fast = ev
		return
	}
	if len(q.h) == 0 || ev.less(&q.h[0]) {
		q.fast, q.has = ev, true
		return
	}
	q.heapPush(ev)
}

func (q *eventQueue) heapPush(ev event) {
	q.h = append(q.h, ev)
	h := q.h
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !ev.less(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = ev
}

// pop removes and returns the earliest event; ok is false when none is left.
func (q *eventQueue) pop() (ev event, ok bool) {
	if q.has {
		q.has = false
		return q.fast, true
	}
	n := len(q.h)
	if n == 0 {
		return event{}, false
	}
	h := q.h
	ev = h[0]
	n--
	last := h[n]
	q.h = h[:n]
	h = q.h
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if h[j].less(&h[m]) {
				m = j
			}
		}
		if !h[m].less(&last) {
			break
		}
		h[i] = h[m]
		i = m
	}
	if n > 0 {
		h[i] = last
	}
	return ev, true
}

// Len is the number of pending events.
func (q *eventQueue) Len() int {
	if q.has {
		return len(q.h) + 1
	}
	return len(q.h)
}

// fifo is a single first-come-first-served server (a CPU or a disk). Because
// every job's service time is known when it is queued and jobs are queued in
// event order, the queue needs no storage: a job queued at now starts when the
// server frees up and the server is then busy until start+d. serve returns the
// job's completion time, at which the caller schedules the next step.
type fifo struct {
	free int64 // time the last queued job completes
	busy int64 // total service time, for utilisation
}

// serve queues a job of duration d at time now and returns its completion time.
func (s *fifo) serve(now, d int64) int64 {
	start := max(now, s.free)
	s.free = start + d
	s.busy += d
	return s.free
}
