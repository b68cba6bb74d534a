package sim

import (
	"math/rand/v2"
	"testing"
)

// TestEventOrder pushes events out of order, with ties, and checks they pop
// by time and, at equal times, in the order they were scheduled.
func TestEventOrder(t *testing.T) {
	var q eventQueue
	in := []struct {
		t   int64
		req int32
	}{{50, 0}, {10, 1}, {30, 2}, {10, 3}, {0, 4}, {30, 5}, {10, 6}, {100, 7}, {0, 8}}
	for _, e := range in {
		q.push(e.t, evDone, e.req)
	}
	want := []int32{4, 8, 1, 3, 6, 2, 5, 0, 7}
	for k, w := range want {
		ev, ok := q.pop()
		if !ok || ev.req != w {
			t.Fatalf("pop %d: got req %d ok %v, want %d", k, ev.req, ok, w)
		}
	}
	if _, ok := q.pop(); ok || q.Len() != 0 {
		t.Fatal("queue not empty")
	}
	// Interleaved push/pop keeps the order too.
	q.push(5, evDone, 1)
	q.push(3, evDone, 2)
	if ev, _ := q.pop(); ev.req != 2 {
		t.Fatalf("got %d, want 2", ev.req)
	}
	q.push(5, evDone, 3) // same time as req 1, scheduled later
	q.push(4, evDone, 4)
	for _, w := range []int32{4, 1, 3} {
		if ev, _ := q.pop(); ev.req != w {
			t.Fatalf("got %d, want %d", ev.req, w)
		}
	}
}

// TestFIFO checks completion times and busy time of a FIFO server by hand:
// jobs (arrival, service) = (0,10) (2,5) (20,3) (21,4) (21,1).
//
//	job 1 runs 0–10, job 2 queues and runs 10–15, the server idles 15–20,
//	job 3 runs 20–23, job 4 23–27, job 5 27–28. Busy = 23, not 28.
func TestFIFO(t *testing.T) {
	var s fifo
	jobs := []struct{ at, d, done int64 }{{0, 10, 10}, {2, 5, 15}, {20, 3, 23}, {21, 4, 27}, {21, 1, 28}}
	for i, j := range jobs {
		if got := s.serve(j.at, j.d); got != j.done {
			t.Errorf("job %d: done at %d, want %d", i+1, got, j.done)
		}
	}
	if s.busy != 23 {
		t.Errorf("busy %d, want 23", s.busy)
	}
}

// TestEventQueueRandom interleaves pushes and pops of random times (many
// ties) and checks every pop against a brute-force minimum by (t, seq).
func TestEventQueueRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q eventQueue
	var ref []event
	var seq uint64
	now := int64(0)
	for step := range 20000 {
		if len(ref) == 0 || rng.IntN(100) < 55 {
			at := now + int64(rng.IntN(20))
			q.push(at, evDone, int32(step))
			seq++
			ref = append(ref, event{t: at, seq: seq, req: int32(step)})
			continue
		}
		m := 0
		for i := range ref {
			if ref[i].less(&ref[m]) {
				m = i
			}
		}
		ev, ok := q.pop()
		if !ok || ev.req != ref[m].req || ev.t != ref[m].t {
			t.Fatalf("step %d: popped %+v, want %+v", step, ev, ref[m])
		}
		now = ev.t
		ref = append(ref[:m], ref[m+1:]...)
		if q.Len() != len(ref) {
			t.Fatalf("step %d: Len %d, want %d", step, q.Len(), len(ref))
		}
	}
}
