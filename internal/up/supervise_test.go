package up

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestBackoffNext checks the restart waits by hand: doubling from Initial
// after short runs, capped at Max, back to Initial after a run of Stable
// or longer.
func TestBackoffNext(t *testing.T) {
	ms := time.Millisecond
	b := backoff{cfg: RestartConfig{Initial: 100 * ms, Max: 1000 * ms, Stable: 10 * time.Second}}
	for i, c := range []struct{ ran, want time.Duration }{
		{0, 100 * ms}, // first death
		{5 * ms, 200 * ms},
		{time.Second, 400 * ms},
		{0, 800 * ms},
		{0, 1000 * ms}, // capped
		{9 * time.Second, 1000 * ms},
		{10 * time.Second, 100 * ms}, // ran Stable: reset
		{0, 200 * ms},
		{time.Hour, 100 * ms},
	} {
		if got := b.next(c.ran); got != c.want {
			t.Errorf("death %d after %v: wait %v, want %v", i, c.ran, got, c.want)
		}
	}
}

// TestRestartConfigFill checks the defaults and that Max is at least
// Initial.
func TestRestartConfigFill(t *testing.T) {
	var r RestartConfig
	r.fill()
	if r != (RestartConfig{Initial: DefaultRestartInitial, Max: DefaultRestartMax, Stable: DefaultRestartStable}) {
		t.Errorf("defaults: %+v", r)
	}
	r = RestartConfig{Initial: time.Minute, Max: time.Second}
	r.fill()
	if r.Max != time.Minute {
		t.Errorf("Max below Initial: got %v, want %v", r.Max, time.Minute)
	}
}

// fakeClock is a clock the test moves: After hands each wait to the test
// on waits, and the wait ends when the test fires it.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits chan fakeWait
}

type fakeWait struct {
	d    time.Duration
	fire chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1e9, 0), waits: make(chan fakeWait, 16)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	w := fakeWait{d: d, fire: make(chan time.Time, 1)}
	c.waits <- w
	return w.fire
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeProc is a process that exits when the test (or a signal) says so.
type fakeProc struct {
	pid        int
	exit       chan error
	once       sync.Once
	ignoreTerm bool // SIGTERM does not end it

	mu   sync.Mutex
	sigs []os.Signal
}

func (p *fakeProc) Pid() int    { return p.pid }
func (p *fakeProc) Wait() error { return <-p.exit }
func (p *fakeProc) die(err error) {
	p.once.Do(func() { p.exit <- err })
}
func (p *fakeProc) Signal(s os.Signal) error {
	p.mu.Lock()
	p.sigs = append(p.sigs, s)
	p.mu.Unlock()
	if !p.ignoreTerm || s != syscall.SIGTERM {
		p.die(errors.New("signal: " + s.String()))
	}
	return nil
}

func (p *fakeProc) signals() []os.Signal {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.sigs)
}

// fakeStarts starts fakeProcs with pids 100, 101, … and hands each to the
// test; fail makes the next start fail instead.
type fakeStarts struct {
	mu         sync.Mutex
	n          int
	fail       bool
	ignoreTerm bool // processes ignore SIGTERM
	procs      chan *fakeProc
}

func (f *fakeStarts) start() (process, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		f.fail = false
		f.n++
		return nil, errors.New("exec: no such file")
	}
	p := &fakeProc{pid: 100 + f.n, exit: make(chan error, 1), ignoreTerm: f.ignoreTerm}
	f.n++
	f.procs <- p
	return p, nil
}

func (f *fakeStarts) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// nextWait returns the supervisor's next wait, failing if it asks for
// none within 10 s (a real-time guard against a hung test, not a timing).
func nextWait(t *testing.T, c *fakeClock) fakeWait {
	t.Helper()
	return recvWithin(t, c.waits, "the supervisor asked for no wait")
}

// recvWithin returns the next value from ch, failing with msg if none comes
// within 10 s (a real-time guard against a hung test, not a timing).
func recvWithin[T any](t *testing.T, ch <-chan T, msg string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal(msg)
		var zero T
		return zero
	}
}

func nextProc(t *testing.T, f *fakeStarts) *fakeProc {
	t.Helper()
	return recvWithin(t, f.procs, "the supervisor started no process")
}

// TestSupervisorCrashLoop drives a supervisor with a fake clock through a
// crash loop: every death is followed by one wait of the expected,
// doubling and capped length, and no process starts until that wait ends
// (a crash loop cannot spin); a stable run resets the wait; a failed start
// counts as a crash; Stop during a wait ends supervision without another
// start.
func TestSupervisorCrashLoop(t *testing.T) {
	ms := time.Millisecond
	clk := newFakeClock()
	f := &fakeStarts{procs: make(chan *fakeProc, 16)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sv, err := newSupervisor("node 0", f.start, RestartConfig{Initial: 100 * ms, Max: 1000 * ms, Stable: 10 * time.Second}, clk, log)
	if err != nil {
		t.Fatal(err)
	}
	p := nextProc(t, f)
	step := func(ran, want time.Duration) {
		t.Helper()
		clk.advance(ran)
		p.die(errors.New("signal: killed"))
		w := nextWait(t, clk)
		if w.d != want {
			t.Errorf("after a %v run: wait %v, want %v", ran, w.d, want)
		}
		before := f.count()
		// Nothing starts while the wait lasts: the supervisor is parked.
		select {
		case q := <-f.procs:
			t.Fatalf("pid %d started during the wait", q.pid)
		case w2 := <-clk.waits:
			t.Fatalf("second wait %v requested during the wait", w2.d)
		default:
		}
		clk.advance(w.d)
		w.fire <- clk.Now()
		p = nextProc(t, f)
		if f.count() != before+1 || sv.Pid() != p.pid {
			t.Errorf("after the wait: %d starts (want %d), pid %d (want %d)", f.count(), before+1, sv.Pid(), p.pid)
		}
	}
	for _, want := range []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1000 * ms, 1000 * ms} {
		step(0, want)
	}
	step(10*time.Second, 100*ms) // a stable run resets
	step(time.Second, 200*ms)

	// A start that fails is a crash of zero length: the next wait doubles.
	f.mu.Lock()
	f.fail = true
	f.mu.Unlock()
	p.die(errors.New("exit status 1"))
	w := nextWait(t, clk)
	if w.d != 400*ms {
		t.Errorf("wait before the failing start: %v, want 400ms", w.d)
	}
	w.fire <- clk.Now()
	w = nextWait(t, clk)
	if w.d != 800*ms {
		t.Errorf("wait after a failed start: %v, want 800ms", w.d)
	}

	// Stop while waiting: no more starts.
	starts := f.count()
	sv.Stop(context.Background())
	if !sv.exited() || f.count() != starts || sv.Starts() != starts {
		t.Errorf("after Stop: exited %v, %d starts (want %d), Starts() %d", sv.exited(), f.count(), starts, sv.Starts())
	}
}

// TestSupervisorStopRunning checks that Stop sends SIGTERM to the running
// process and does not restart it; with an ended ctx, a process that
// ignores SIGTERM gets SIGKILL.
func TestSupervisorStopRunning(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name       string
		ignoreTerm bool
		ctx        context.Context
		want       []os.Signal
	}{
		{"SIGTERM ends it", false, context.Background(), []os.Signal{syscall.SIGTERM}},
		{"ignores SIGTERM, ctx ended", true, ended, []os.Signal{syscall.SIGTERM, syscall.SIGKILL}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := newFakeClock()
			f := &fakeStarts{procs: make(chan *fakeProc, 4), ignoreTerm: c.ignoreTerm}
			sv, err := newSupervisor("node 0", f.start, RestartConfig{}, clk, log)
			if err != nil {
				t.Fatal(err)
			}
			p := nextProc(t, f)
			sv.Stop(c.ctx)
			if got := p.signals(); !slices.Equal(got, c.want) {
				t.Errorf("signals %v, want %v", got, c.want)
			}
			if !sv.exited() || f.count() != 1 {
				t.Errorf("after Stop: exited %v, %d starts (want 1)", sv.exited(), f.count())
			}
			select {
			case w := <-clk.waits:
				t.Errorf("restart wait %v after Stop", w.d)
			default:
			}
		})
	}
}
