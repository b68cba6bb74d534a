//go:build linux

package sysmon

import (
	"runtime"
	"sync"
	"testing"
	"time"

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
	tid, err := idleTries(time.Second)
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

// TestIdleWatchRestoresInheritors: a thread that ends up in SCHED_IDLE
// besides sysmon (as one sysmon starts would, inheriting its class) is put
// back in the process's class by the watcher; sysmon stays idle.
func TestIdleWatchRestoresInheritors(t *testing.T) {
	tid, err := idleTries(20 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
			got <- -1
			return
		}
		got <- unix.Gettid()
		<-stop
	}()
	w := <-got
	if w < 0 {
		t.Skip("cannot set SCHED_IDLE on a thread here")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := Policy(w)
		if err != nil {
			t.Fatal(err)
		}
		if p != unix.SCHED_IDLE {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d still in SCHED_IDLE after 5 s", w)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if p, err := Policy(tid); err != nil || p != unix.SCHED_IDLE {
		t.Fatalf("sysmon's thread %d: policy %d (%v), want SCHED_IDLE", tid, p, err)
	}
}

// idleTries is idle with the watcher's period every, tried up to 20
// times (1 s): on a loaded machine (the whole test suite in CI) sysmon,
// which sleeps 20 µs at a time while it preempts a busy goroutine, may
// wait for a core through one whole search and never be seen in
// nanosleep (with two busy loops on both cores, 5 tries failed 1–4 times
// in 30 runs).
func idleTries(every time.Duration) (int, error) {
	var err error
	for range 20 {
		var tid int
		if tid, err = idle(every); err == nil {
			return tid, nil
		}
	}
	return 0, err
}
