//go:build linux

package sysmon

import (
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIdleFindsSysmonNotAWorker checks that Idle moves exactly one thread
// to SCHED_IDLE and that it is none of the threads that run goroutines:
// every goroutine below locks itself to a thread and reports its ID while
// Idle runs, so a finder that picked a worker thread would be caught.
func TestIdleFindsSysmonNotAWorker(t *testing.T) {
	var mu sync.Mutex
	workers := map[int]bool{unix.Gettid(): true}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			mu.Lock()
			workers[unix.Gettid()] = true
			mu.Unlock()
			<-stop
		}()
	}
	tid, err := Idle()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if workers[tid] {
		t.Fatalf("Idle picked thread %d, which runs goroutines", tid)
	}
	p, err := Policy(tid)
	if err != nil {
		t.Fatal(err)
	}
	if p != unix.SCHED_IDLE {
		t.Fatalf("thread %d has policy %d after Idle, want SCHED_IDLE (%d)", tid, p, unix.SCHED_IDLE)
	}
	for w := range workers {
		p, err := Policy(w)
		if err != nil {
			continue // the thread may have exited
		}
		if p == unix.SCHED_IDLE {
			t.Errorf("worker thread %d was moved to SCHED_IDLE too", w)
		}
	}
}
