package up

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// RestartConfig says how StartProcs restarts a node process that died
// (crash or kill): after an exponentially growing wait, capped, reset
// once a process has run long enough to call it healthy — the scheme of
// systemd's Restart=on-failure with RestartSec and of Kubernetes'
// CrashLoopBackOff (10 s doubling to 5 min, reset after 10 min of running).
// The cluster keeps serving meanwhile: the front stops sending to the dead
// node at its first failed connect (passive health) and takes it back after
// the health checker's Rise good checks.
type RestartConfig struct {
	// Initial is the wait before restarting a process that died after
	// running for Stable or longer (or the first time). Default 100 ms.
	Initial time.Duration
	// Max caps the wait, which doubles with every death that follows a
	// short run. Default 30 s.
	Max time.Duration
	// Stable is how long a process must have run for its death to start
	// the backoff again at Initial. Default 10 s.
	Stable time.Duration
}

// Defaults of RestartConfig.
const (
	DefaultRestartInitial = 100 * time.Millisecond
	DefaultRestartMax     = 30 * time.Second
	DefaultRestartStable  = 10 * time.Second
)

func (r *RestartConfig) fill() {
	if r.Initial <= 0 {
		r.Initial = DefaultRestartInitial
	}
	if r.Max <= 0 {
		r.Max = DefaultRestartMax
	}
	r.Max = max(r.Max, r.Initial)
	if r.Stable <= 0 {
		r.Stable = DefaultRestartStable
	}
}

// backoff computes restart waits. The zero value with a filled cfg starts
// at Initial.
type backoff struct {
	cfg  RestartConfig
	last time.Duration // the previous wait; 0 before the first or after a reset
}

// next returns the wait before restarting a process that ran for ran:
// Initial after a stable run (or the first time), else twice the previous
// wait, at most Max.
func (b *backoff) next(ran time.Duration) time.Duration {
	if ran >= b.cfg.Stable || b.last == 0 {
		b.last = b.cfg.Initial
	} else {
		b.last = min(2*b.last, b.cfg.Max)
	}
	return b.last
}

// clock is the time a supervisor sees; tests inject a fake one.
type clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// process is a started child as the supervisor uses it (an *exec.Cmd, or a
// fake in tests).
type process interface {
	Pid() int
	// Wait blocks until the process exits and returns why.
	Wait() error
	Signal(os.Signal) error
}

// cmdProcess adapts a started *exec.Cmd.
type cmdProcess struct{ cmd *exec.Cmd }

func (p cmdProcess) Pid() int                 { return p.cmd.Process.Pid }
func (p cmdProcess) Wait() error              { return p.cmd.Wait() }
func (p cmdProcess) Signal(s os.Signal) error { return p.cmd.Process.Signal(s) }

// supervisor keeps one child process running: when it exits without being
// asked to, the exit is logged and the child is started again after a
// backoff wait (RestartConfig). Stop ends it.
type supervisor struct {
	name  string
	start func() (process, error)
	bo    backoff
	clock clock
	log   *slog.Logger

	mu      sync.Mutex
	cur     process // nil while waiting to restart
	pid     int     // of the latest process started
	starts  int     // processes started, the first included
	stopped bool
	stop    chan struct{} // closed by Stop
	done    chan struct{} // closed when run returns
}

// newSupervisor starts the first process at once (so that a binary that
// cannot run fails StartProcs) and supervises it on its own goroutine.
func newSupervisor(name string, start func() (process, error), cfg RestartConfig, clk clock, log *slog.Logger) (*supervisor, error) {
	cfg.fill()
	s := &supervisor{name: name, start: start, bo: backoff{cfg: cfg}, clock: clk, log: log,
		stop: make(chan struct{}), done: make(chan struct{})}
	p, err := start()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s.cur, s.pid, s.starts = p, p.Pid(), 1
	go s.run(p)
	return s, nil
}

// run waits for p and restarts it until Stop. A start that fails counts
// as a death after a run of zero length.
func (s *supervisor) run(p process) {
	defer close(s.done)
	var startErr error
	for {
		began := s.clock.Now()
		err, pid := startErr, 0
		if p != nil {
			err, pid = p.Wait(), p.Pid()
			if err == nil {
				err = errors.New("exited with status 0")
			}
		}
		ran := s.clock.Now().Sub(began)
		s.mu.Lock()
		s.cur = nil
		stopped := s.stopped
		s.mu.Unlock()
		if stopped {
			return
		}
		wait := s.bo.next(ran)
		s.log.Warn("child process died; restarting it", "child", s.name, "pid", pid, "err", err,
			"ran", ran.Round(time.Millisecond), "restart_in", wait)
		select {
		case <-s.clock.After(wait):
		case <-s.stop:
			return
		}
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return
		}
		p, startErr = s.start()
		s.starts++
		if startErr != nil {
			startErr = fmt.Errorf("restart: %w", startErr)
			p = nil
		} else {
			s.cur, s.pid = p, p.Pid()
			s.log.Info("child process restarted", "child", s.name, "pid", s.pid)
		}
		s.mu.Unlock()
	}
}

// Pid is the process id of the latest process started.
func (s *supervisor) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// Starts counts the processes started, the first included.
func (s *supervisor) Starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts
}

// exited reports whether supervision has ended with no process left
// running (after Stop).
func (s *supervisor) exited() bool {
	select {
	case <-s.done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.cur == nil
	default:
		return false
	}
}

// Stop ends the supervision and sends SIGTERM to the running process, then
// waits for it until ctx ends, when it is killed (SIGKILL).
func (s *supervisor) Stop(ctx context.Context) {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.stop)
	}
	p := s.cur
	s.mu.Unlock()
	if p != nil {
		p.Signal(syscall.SIGTERM)
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		if p != nil {
			p.Signal(syscall.SIGKILL)
		}
		<-s.done
	}
}
