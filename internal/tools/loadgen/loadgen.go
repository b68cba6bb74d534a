// Package loadgen is shoal's HTTP and TCP load generator: the instrument
// behind every performance claim of the project (SPEC §7).
//
// It runs closed-loop (C persistent connections, each sending its next
// request as soon as the previous response ends) or open-loop at a fixed
// rate, where request i is due at t0 + i/R and its latency is measured from
// that intended time, so a stalled server cannot hide its queueing delay
// ("coordinated omission"). Each connection is one goroutine driving a raw
// net.Conn with a hand-written HTTP/1.1 response parser — no net/http on the
// hot path, no allocation per request, and on plain TCP one write and one
// read a request, raw system calls (plainConn) — so that on one core it
// keeps up with wrk. On Linux the uring engine (Config.Engine) runs a plain
// closed-loop run's connections from one goroutine on one io_uring instead,
// one system call for all that is ready (ring_linux.go), where a core
// shared with the server under test matters. Latency goes into per-worker
// log-linear histograms (≤ 0.4 % relative error) merged at the end;
// failures are counted by kind.
//
// The TCP mode (RunTCP) is seed 002's experiment client: connect, send B
// bytes, read B bytes, close, repeat, reported per concurrency level so the
// migrate-versus-relay crossover can be reproduced.
package loadgen

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/base/procstat"
)

// Config describes one HTTP run. Zero fields take the documented defaults.
type Config struct {
	// URL is the base URL, "http://host[:port][/path]". With no Workload
	// its path (and query) is the single target requested; with one, its
	// path is the prefix the workload's targets were built with.
	URL string
	// Workload picks each request's target; nil means Fixed(URL's path).
	Workload Workload
	// Connections is the number of concurrent connections (default 1).
	Connections int
	// Duration bounds the run in time; Requests bounds it in count. With
	// both zero a finite workload (a trace) runs one pass and an unbounded
	// one runs for 10 s.
	Duration time.Duration
	Requests uint64
	// Rate, if > 0, makes the run open-loop: request i is due at
	// start + i/Rate (requests per second, over all connections) and its
	// latency counts from then. Zero is closed-loop.
	Rate float64
	// DisableKeepAlive opens a new connection for every request (and sends
	// "Connection: close"); latency then includes the TCP handshake.
	DisableKeepAlive bool
	// ConnRequests, when > 0, closes each connection after that many
	// requests and opens a new one for the next (browsers' keep-alive
	// connections carry a handful of requests, not thousands). Default 0:
	// connections stay open.
	ConnRequests uint64
	// Timeout bounds connecting and each request/response exchange
	// (default 5 s). It is enforced by a watchdog that ticks every
	// Timeout/10 (at most 100 ms), so the hot path sets no deadlines.
	Timeout time.Duration
	// Method is "GET" (default) or "HEAD".
	Method string
	// Insecure skips verifying an https URL's certificate (a self-signed
	// one, as `shoal up --tls` makes). Default false.
	Insecure bool
	// Engine is "goroutines" (default: a goroutine per connection) or
	// "uring": every connection on one io_uring, one system call for all
	// the sends and receives that are ready (Linux; plain http, closed
	// loop, Content-Length-framed responses). It costs a core shared with
	// the server under test about a third less (docs/benchmarks.md).
	Engine string
}

const (
	defaultTimeout  = 5 * time.Second
	defaultDuration = 10 * time.Second
)

// Result is the outcome of a run.
type Result struct {
	// Requests counts complete responses, whatever their status (as wrk
	// does); OK counts those with a 2xx or 3xx status.
	Requests, OK uint64
	// Duration is the measured wall time from the first send to the end.
	Duration time.Duration
	// CPU is the load generator's own user and system CPU time over the
	// run (not its start-up, such as reading a trace): what it took from
	// a core it may share with the server under test.
	CPU time.Duration
	// WireBytes counts response bytes read (status line, headers, body);
	// BodyBytes only the bodies.
	WireBytes, BodyBytes int64
	// Connects counts TCP connections opened.
	Connects uint64
	// Backlog (open loop only) counts requests that were due before the
	// run ended but never sent because every connection was busy: the
	// queue an overloaded server leaves behind. Their latency is unknown
	// and not in the histogram, so a backlog well above the connection
	// count means the percentiles are optimistic (raise --connections).
	Backlog uint64
	// Errors counts failures by kind; 4xx/5xx responses are also Requests.
	Errors [NumErrorKinds]uint64
	// Latency holds one sample per complete response: completion minus
	// send time (closed loop) or minus intended time (open loop).
	Latency Histogram
}

// RPS is complete responses per second.
func (r *Result) RPS() float64 { return perSec(float64(r.Requests), r.Duration) }

// BytesPerSec is response bytes (headers included, like wrk) per second.
func (r *Result) BytesPerSec() float64 { return perSec(float64(r.WireBytes), r.Duration) }

func perSec(x float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return x / d.Seconds()
}

// Runner executes one Config. It exists (rather than a bare Run function) so
// that a caller can poll Completed for a progress display while Run works.
type Runner struct {
	cfg     Config
	addr    string
	host    string
	limit   uint64      // request count bound, 0 = none
	tls     *tls.Config // nil for http
	workers []*worker

	next atomic.Uint64 // index of the next request
	// ringDone counts the requests finished by the uring engine.
	ringDone atomic.Uint64
	stopped  atomic.Bool
	t0       time.Time
	ran      atomic.Bool
}

// New validates cfg and prepares a Runner.
func New(cfg Config) (*Runner, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", cfg.URL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("url %q: only http:// and https:// are supported", cfg.URL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("url %q: no host", cfg.URL)
	}
	if cfg.Connections <= 0 {
		cfg.Connections = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.Rate < 0 {
		return nil, fmt.Errorf("rate %v: must be ≥ 0", cfg.Rate)
	}
	switch cfg.Method {
	case "":
		cfg.Method = "GET"
	case "GET", "HEAD":
	default:
		return nil, fmt.Errorf("method %q: only GET and HEAD are supported", cfg.Method)
	}
	if err := checkEngine(&cfg, u.Scheme); err != nil {
		return nil, err
	}
	if cfg.Workload == nil {
		t := u.EscapedPath()
		if t == "" {
			t = "/"
		}
		if u.RawQuery != "" {
			t += "?" + u.RawQuery
		}
		cfg.Workload = Fixed(t)
	}
	r := &Runner{cfg: cfg, host: u.Host, limit: cfg.Requests}
	r.addr = u.Host
	if u.Port() == "" {
		r.addr = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	if u.Scheme == "https" {
		r.tls = tlsConfig(u.Hostname(), cfg.Insecure)
	}
	if r.limit == 0 && cfg.Duration == 0 {
		if n := cfg.Workload.Len(); n > 0 {
			r.limit = n
		} else {
			r.cfg.Duration = defaultDuration
		}
	}
	if cfg.Engine != EngineRing { // the uring engine keeps its own connections
		for i := 0; i < cfg.Connections; i++ {
			r.workers = append(r.workers, newWorker(r))
		}
	}
	return r, nil
}

// Probe connects to the target once and closes, so that a run against an
// address where nothing listens stops with one clear error instead of
// counting a connect error per attempt for the whole duration.
func (r *Runner) Probe(ctx context.Context) error {
	d := net.Dialer{Timeout: r.cfg.Timeout}
	c, err := d.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return fmt.Errorf("nothing answers at %s: %w", r.addr, err)
	}
	if r.tls != nil {
		if c, err = r.handshake(ctx, c); err != nil {
			return fmt.Errorf("https %s: %w", r.addr, err)
		}
	}
	return c.Close()
}

// Completed is the number of requests finished so far (successes and
// failures); safe to call during Run.
func (r *Runner) Completed() uint64 {
	n := r.ringDone.Load()
	for _, w := range r.workers {
		n += w.done.Load()
	}
	return n
}

// Limit is the request bound of the run (0 when it is bounded by time).
func (r *Runner) Limit() uint64 { return r.limit }

// Duration is the time bound of the run (0 when bounded by count).
func (r *Runner) Duration() time.Duration { return r.cfg.Duration }

// Run performs the run and returns its merged result. Cancelling ctx ends
// the run early (the result covers what was done). A Runner runs once.
func (r *Runner) Run(ctx context.Context) (*Result, error) {
	if !r.ran.CompareAndSwap(false, true) {
		return nil, errors.New("loadgen: Runner.Run called twice")
	}
	cpu0 := procstat.CPU()
	run := r.runWorkers
	if r.cfg.Engine == EngineRing {
		run = r.runRing
	}
	res, err := run(ctx)
	if res != nil {
		res.CPU = procstat.CPU() - cpu0
	}
	return res, err
}

// runWorkers is Run with the goroutines engine: one worker a connection.
func (r *Runner) runWorkers(ctx context.Context) (*Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.t0 = time.Now()
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Go(func() {
			w.run(ctx)
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	tick := r.cfg.Timeout / 10
	if tick > 100*time.Millisecond {
		tick = 100 * time.Millisecond
	}
	if tick < time.Millisecond {
		tick = time.Millisecond
	}
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	var deadline <-chan time.Time
	if r.cfg.Duration > 0 {
		t := time.NewTimer(r.cfg.Duration)
		defer t.Stop()
		deadline = t.C
	}
	end := time.Time{}
	done := ctx.Done()
loop:
	for {
		select {
		case <-finished:
			break loop
		case <-ticker.C:
			r.watchdog()
		case <-deadline:
			end = time.Now()
			deadline, done = nil, nil // stop once; the workers now drain
			r.stop(cancel)
		case <-done: // the caller cancelled
			end = time.Now()
			deadline, done = nil, nil
			r.stop(cancel)
		}
	}
	if end.IsZero() {
		end = time.Now()
	}
	res := &Result{Duration: end.Sub(r.t0)}
	for _, w := range r.workers {
		res.merge(&w.res)
	}
	if r.cfg.Rate > 0 {
		due := uint64(math.Ceil(res.Duration.Seconds() * r.cfg.Rate)) // i/R < duration
		if r.limit > 0 && due > r.limit {
			due = r.limit
		}
		var sent uint64
		for _, w := range r.workers {
			sent += w.sent
		}
		if due > sent {
			res.Backlog = due - sent
		}
	}
	return res, nil
}

// stop ends the run: no new requests start and in-flight ones are
// interrupted (their errors are not counted).
func (r *Runner) stop(cancel context.CancelFunc) {
	if r.stopped.Swap(true) {
		return
	}
	cancel()
	for _, w := range r.workers {
		w.interrupt()
	}
}

// watchdog interrupts every request that has been in flight for longer
// than the timeout.
func (r *Runner) watchdog() {
	now := int64(time.Since(r.t0)) + 1
	for _, w := range r.workers {
		s := w.inflight.Load()
		if s > 0 && now-s > int64(r.cfg.Timeout) {
			w.kill(s)
		}
	}
}

func (res *Result) merge(o *Result) {
	res.Requests += o.Requests
	res.OK += o.OK
	res.WireBytes += o.WireBytes
	res.BodyBytes += o.BodyBytes
	res.Connects += o.Connects
	for k := range o.Errors {
		res.Errors[k] += o.Errors[k]
	}
	res.Latency.Merge(&o.Latency)
}

// worker drives one connection.
type worker struct {
	r  *Runner
	rd *respReader

	mu   sync.Mutex // guards conn against the watchdog and stop
	conn net.Conn
	// plain is conn's raw I/O when it is plain TCP (see plainConn).
	plain plainConn

	// inflight is the start of the request in flight as nanoseconds since
	// t0 plus one, 0 when idle, -1 once the watchdog has killed it.
	inflight atomic.Int64
	done     atomic.Uint64

	sent       uint64 // requests started (open-loop backlog accounting)
	onConn     uint64 // requests answered on the current connection
	req        []byte
	lastTarget string
	res        Result
	timer      *time.Timer
}

func newWorker(r *Runner) *worker {
	return &worker{r: r, rd: newRespReader(nil, defaultBufSize)}
}

func (w *worker) run(ctx context.Context) {
	r := w.r
	defer w.closeConn()
	for !r.stopped.Load() {
		i := r.next.Add(1) - 1
		if r.limit > 0 && i >= r.limit {
			return
		}
		// Times are offsets from t0 on the monotonic clock: one clock
		// read each, where time.Now would also read the wall clock.
		now := time.Since(r.t0)
		start := now
		if r.cfg.Rate > 0 {
			start = time.Duration(float64(i) * 1e9 / r.cfg.Rate) // due at t0 + i/R
			if start > now {
				if !w.sleepFor(ctx, start-now) {
					return
				}
				now = time.Since(r.t0)
			}
		}
		w.sent++
		w.do(ctx, r.cfg.Workload.Target(i), start, now)
		w.done.Add(1)
	}
}

// sleepFor waits for d; false if the run stopped meanwhile.
func (w *worker) sleepFor(ctx context.Context, d time.Duration) bool {
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	select {
	case <-w.timer.C:
		return true
	case <-ctx.Done():
		w.timer.Stop()
		return false
	}
}

// do performs one request; start is the time latency counts from, now the
// time it is actually sent, both as offsets from t0.
func (w *worker) do(ctx context.Context, target string, start, now time.Duration) {
	r := w.r
	s := int64(now) + 1
	w.inflight.Store(s)
	if w.conn == nil {
		d := net.Dialer{Timeout: r.cfg.Timeout}
		c, err := d.DialContext(ctx, "tcp", r.addr)
		if err == nil && r.tls != nil {
			c, err = r.handshake(ctx, c)
		}
		if err != nil {
			w.inflight.Store(0)
			w.fail(ErrConnect)
			return
		}
		w.res.Connects++
		w.onConn = 0
		w.mu.Lock()
		w.conn = c
		w.mu.Unlock()
		if w.plain.bind(c) {
			w.rd.reset(&w.plain)
		} else {
			w.rd.reset(c)
		}
		if r.stopped.Load() { // stop raced with the dial
			w.inflight.Store(0)
			return
		}
	}
	if target != w.lastTarget || w.req == nil {
		w.buildRequest(target)
	}
	err := w.send()
	var resp response
	if err == nil {
		resp, err = w.rd.read(r.cfg.Method == "HEAD")
	}
	killed := !w.inflight.CompareAndSwap(s, 0)
	if killed {
		w.inflight.Store(0)
	}
	if err != nil {
		w.closeConn()
		w.fail(classify(err))
		return
	}
	w.res.Latency.Record(time.Since(r.t0) - start)
	w.res.Requests++
	w.res.WireBytes += resp.wireBytes
	w.res.BodyBytes += resp.bodyBytes
	switch {
	case resp.status >= 500:
		w.res.Errors[ErrStatus5xx]++
	case resp.status >= 400:
		w.res.Errors[ErrStatus4xx]++
	default:
		w.res.OK++
	}
	w.onConn++
	if killed || resp.close || r.cfg.DisableKeepAlive || r.cfg.ConnRequests > 0 && w.onConn >= r.cfg.ConnRequests {
		w.closeConn()
	}
}

// send sends the request, or on a plain TCP connection arms plainConn to
// send it with the read that waits for the answer. Bytes already buffered
// (a server that sent more than it framed) are parsed before any read, so
// then the request goes out at once.
func (w *worker) send() error {
	if w.plain.active() && w.rd.buffered() == 0 {
		w.plain.arm(w.req)
		return nil
	}
	_, err := w.conn.Write(w.req)
	return err
}

// fail counts an error unless the run is over (then the error is ours).
func (w *worker) fail(k ErrorKind) {
	if !w.r.stopped.Load() {
		w.res.Errors[k]++
	}
}

func (w *worker) buildRequest(target string) {
	w.req, w.lastTarget = w.r.appendRequest(w.req[:0], target), target
}

// appendRequest appends the request head for target to b.
func (r *Runner) appendRequest(b []byte, target string) []byte {
	b = append(b, r.cfg.Method...)
	b = append(b, ' ')
	b = append(b, target...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, r.host...)
	if r.cfg.DisableKeepAlive {
		b = append(b, "\r\nConnection: close"...)
	}
	return append(b, "\r\n\r\n"...)
}

func (w *worker) closeConn() {
	w.mu.Lock()
	if w.conn != nil {
		w.plain.unbind()
		w.conn.Close()
		w.conn = nil
	}
	w.mu.Unlock()
}

// kill interrupts the request that started at s, if it is still in flight.
// Holding mu across the CAS and the deadline keeps the interruption from
// landing on a replacement connection.
func (w *worker) kill(s int64) {
	w.mu.Lock()
	if w.inflight.CompareAndSwap(s, -1) && w.conn != nil {
		w.conn.SetDeadline(time.Unix(1, 0))
	}
	w.mu.Unlock()
}

// interrupt makes any blocked I/O on the connection return now.
func (w *worker) interrupt() {
	w.mu.Lock()
	if w.conn != nil {
		w.conn.SetDeadline(time.Unix(1, 0))
	}
	w.mu.Unlock()
}
