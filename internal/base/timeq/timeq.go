// Package timeq is a queue of timed events that pops them in time order,
// events due at the same instant in the order they were pushed. The WAN
// emulator (internal/cdn/wan) delays packets with it, and the virtual-clock
// networks of the chord and mbpp tests deliver messages with it; each had
// its own container/heap code with the same ordering, and the tie-break by
// insertion is what keeps those simulations deterministic.
package timeq

import (
	"container/heap"
	"time"
)

// Queue holds values of type T, each due at a time. The zero value is an
// empty queue. It is not safe for concurrent use.
type Queue[T any] struct {
	h   items[T]
	seq uint64
}

type item[T any] struct {
	at  time.Time
	seq uint64
	v   T
}

type items[T any] []item[T]

func (h items[T]) Len() int { return len(h) }
func (h items[T]) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h items[T]) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *items[T]) Push(x any)   { *h = append(*h, x.(item[T])) }
func (h *items[T]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Push adds v, due at at.
func (q *Queue[T]) Push(at time.Time, v T) {
	q.seq++
	heap.Push(&q.h, item[T]{at: at, seq: q.seq, v: v})
}

// Len is the number of values queued.
func (q *Queue[T]) Len() int { return len(q.h) }

// Next is the time the earliest value is due; ok is false when the queue
// is empty.
func (q *Queue[T]) Next() (at time.Time, ok bool) {
	if len(q.h) == 0 {
		return time.Time{}, false
	}
	return q.h[0].at, true
}

// Due reports whether a value is due at or before now.
func (q *Queue[T]) Due(now time.Time) bool { return len(q.h) > 0 && !q.h[0].at.After(now) }

// PopDue removes and returns the earliest value if it is due at or before
// now, with its time; ok is false (and nothing is removed) otherwise.
func (q *Queue[T]) PopDue(now time.Time) (v T, at time.Time, ok bool) {
	if !q.Due(now) {
		return v, time.Time{}, false
	}
	it := heap.Pop(&q.h).(item[T])
	return it.v, it.at, true
}
