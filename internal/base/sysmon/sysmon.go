//go:build linux

// Package sysmon moves the Go runtime's system-monitor thread to the lowest
// scheduling class (SCHED_IDLE), so that it stops taking the CPU away from
// the thread that relays requests.
//
// Why: sysmon is a runtime thread that wakes every 20 µs while the program
// is busy, doubling its sleep only after 50 quiet rounds. It resets to
// 20 µs whenever the process's only P goes idle and a goroutine then
// enters a system call. A front-end pinned to one core with GOMAXPROCS=1
// does that thousands of times a second: it waits a few microseconds for a
// node or a client, then calls write.
//
// Measured on the relay at 1 KB (bench/front-vs-haproxy.sh shape, 5 s runs):
//   - sysmon woke 3,500–4,000 times a second;
//   - it used 0.36–0.46 s of CPU in 5 s;
//   - its wake-ups preempted the relaying thread mid-system-call. Such a call
//     then looked long, so sysmon took the P away from it, which cost more
//     thread switches.
//
// In SCHED_IDLE, sysmon runs only when the core has nothing else to do:
//   - its CPU use fell to 0.07 s;
//   - the front's CPU per request fell from 16.3–16.5 µs to 14.7–15.2 µs;
//   - in that run, HAProxy took 15.4–16.0 µs.
//
// What sysmon does is still done, just later when the core is saturated:
//   - preempting a goroutine that runs over 10 ms;
//   - taking the P from a blocking system call;
//   - polling the network when nobody else has for 10 ms;
//   - forcing a GC every 2 minutes.
//
// SCHED_IDLE still guarantees a share of the CPU, so nothing starves. The
// front does no blocking file I/O on its request path, so this delay costs
// it nothing. The node uses it too (config.NodeServer.SysmonIdle): there a
// goroutine blocked in a disk read keeps its P until the core has a moment
// for sysmon, which only a host whose cores other work keeps busy notices.
//
// Threads sysmon starts inherit its class (see Idle): before Idle watched
// for them, four nodes moving connections on one saturated core ran their
// goroutines on such threads in most runs, at half their speed
// (docs/benchmarks.md, "Receiving a handed connection").
//
// There is no API that names sysmon's thread. The runtime starts sysmon
// first, as its second thread, and sysmon sleeps with nanosleep, which no
// other runtime thread does. Idle finds the one thread whose current
// system call (/proc/self/task/TID/syscall) is nanosleep. Thread IDs are
// not trusted.
package sysmon

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Idle finds the runtime's sysmon thread and puts it in SCHED_IDLE,
// returning its thread ID. It looks for up to about 50 ms (sysmon sleeps at
// most 10 ms between rounds while the program runs) and fails, changing
// nothing, if no single thread is seen in nanosleep.
//
// A thread inherits its creator's scheduling class, and sysmon creates
// threads: when it takes a P from a system call and no thread is idle, the
// one it starts runs goroutines from then on. In SCHED_IDLE those would be
// starved by any other work on the core, so Idle also starts a watcher
// that, every second, puts any other thread of the process found in
// SCHED_IDLE back in the class the process runs in.
func Idle() (int, error) {
	return idle(time.Second)
}

// idle is Idle with the watcher's period.
func idle(every time.Duration) (int, error) {
	tid, err := find(50*time.Millisecond, unix.SYS_NANOSLEEP)
	if err != nil {
		return 0, err
	}
	base, err := unix.SchedGetAttr(unix.Getpid(), 0)
	if err != nil {
		return 0, fmt.Errorf("sysmon: process: sched_getattr: %w", err)
	}
	if err := unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
		return 0, fmt.Errorf("sysmon: thread %d: sched_setattr SCHED_IDLE: %w", tid, err)
	}
	go watch(tid, *base, every)
	return tid, nil
}

// watch puts every thread but sysmon's that is in SCHED_IDLE back in
// base's class, every period, for the life of the process.
func watch(sysmonTID int, base unix.SchedAttr, every time.Duration) {
	base.Size = unix.SizeofSchedAttr
	for range time.Tick(every) {
		tids, err := threadsWith(unix.SCHED_IDLE)
		if err != nil {
			continue
		}
		for _, t := range tids {
			if t != sysmonTID {
				_ = unix.SchedSetAttr(t, &base, 0)
			}
		}
	}
}

// threadsWith lists the threads of this process in scheduling policy p.
func threadsWith(p uint32) ([]int, error) {
	return threadsWhere(func(tid int) (bool, error) {
		a, err := unix.SchedGetAttr(tid, 0)
		return err == nil && a.Policy == p, nil // an error: the thread exited
	})
}

// Policy returns the scheduling policy of thread tid of this process
// (unix.SCHED_OTHER, unix.SCHED_IDLE, …).
func Policy(tid int) (uint32, error) {
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return 0, fmt.Errorf("sysmon: thread %d: sched_getattr: %w", tid, err)
	}
	return a.Policy, nil
}

// find samples this process's threads until exactly one of them is in
// system call nr, at most for the given time.
func find(limit time.Duration, nr int) (int, error) {
	deadline := time.Now().Add(limit)
	for {
		tids, err := threadsIn(nr)
		if err != nil {
			return 0, err
		}
		if len(tids) == 1 {
			return tids[0], nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("sysmon: %d threads found in nanosleep, want exactly 1", len(tids))
		}
		// Wait busy, not with time.Sleep: while every P is idle, sysmon
		// sleeps in a futex until the next timer instead of nanosleep, so a
		// sleeping finder of an idle program (a node just started) could
		// miss it throughout. Yield while busy, though: a goroutine that
		// runs 10 ms without a scheduling point is preempted by sysmon,
		// which then polls every 20 µs, and on a loaded machine spends
		// those rounds waiting for a core rather than in nanosleep.
		for t := time.Now(); time.Since(t) < 200*time.Microsecond; {
			runtime.Gosched()
		}
	}
}

// threadsIn lists the threads of this process whose current system call
// is nr, reading /proc/self/task/TID/syscall (first field: the number, or
// "running").
func threadsIn(nr int) ([]int, error) {
	want := strconv.Itoa(nr)
	return threadsWhere(func(tid int) (bool, error) {
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/syscall")
		if err != nil {
			if errors.Is(err, os.ErrNotExist) { // the thread exited
				return false, nil
			}
			return false, fmt.Errorf("sysmon: %w", err)
		}
		f, _, _ := strings.Cut(string(b), " ")
		return f == want, nil
	})
}

// threadsWhere lists the threads of this process for which ok holds.
func threadsWhere(ok func(tid int) (bool, error)) ([]int, error) {
	d, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("sysmon: %w", err)
	}
	var tids []int
	for _, e := range d {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		yes, err := ok(tid)
		if err != nil {
			return nil, err
		}
		if yes {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
