package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/base/accept"
)

// TCPConfig describes one run of seed 002's experiment client (its §4
// "test method"): every worker connects, sends SendBytes, reads RecvBytes,
// closes, and repeats. Comparing the mean time per operation with and
// without connection migration at rising concurrency is how the seed finds
// its crossover (migration wins above ~45 threads).
//
// Every operation uses a fresh connection, so a long run leaves many sockets
// in TIME_WAIT; on loopback Linux reuses them (net.ipv4.tcp_tw_reuse = 2,
// the default), against a remote server set tcp_tw_reuse = 1 or keep runs
// short, or connects fail with EADDRNOTAVAIL (counted as "connect").
type TCPConfig struct {
	// Addr is the server, "host:port".
	Addr string
	// Connections is the number of concurrent workers (default 1).
	Connections int
	// SendBytes and RecvBytes are the fixed request and reply sizes.
	SendBytes, RecvBytes int
	// Duration is how long the level runs (default 5 s).
	Duration time.Duration
	// Timeout bounds each operation (default 5 s).
	Timeout time.Duration
}

// TCPResult is the outcome of one concurrency level.
type TCPResult struct {
	Connections int
	// Ops counts completed connect-send-receive-close operations.
	Ops      uint64
	Duration time.Duration
	// Latency holds the time of each complete operation.
	Latency Histogram
	Errors  [NumErrorKinds]uint64
}

// OpsPerSec is completed operations per second.
func (r *TCPResult) OpsPerSec() float64 { return perSec(float64(r.Ops), r.Duration) }

// RunTCP runs one concurrency level.
func RunTCP(ctx context.Context, cfg TCPConfig) (*TCPResult, error) {
	if cfg.Addr == "" {
		return nil, errors.New("tcp bench: no address")
	}
	if cfg.SendBytes < 0 || cfg.RecvBytes < 0 {
		return nil, fmt.Errorf("tcp bench: negative sizes %d/%d", cfg.SendBytes, cfg.RecvBytes)
	}
	if cfg.Connections <= 0 {
		cfg.Connections = 1
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 5 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	// A cancel (not a deadline) context: a dial that inherits a deadline
	// fails with "i/o timeout" before ctx reports Done, which would count
	// the end of the run as errors.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stopped atomic.Bool
	stopTimer := time.AfterFunc(cfg.Duration, func() { stopped.Store(true); cancel() })
	defer stopTimer.Stop()

	results := make([]TCPResult, cfg.Connections)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range results {
		wg.Add(1)
		go func(res *TCPResult) {
			defer wg.Done()
			send := make([]byte, cfg.SendBytes)
			recv := make([]byte, 32<<10)
			d := net.Dialer{Timeout: cfg.Timeout}
			for ctx.Err() == nil {
				start := time.Now()
				err := tcpOp(ctx, &d, cfg, send, recv)
				if err != nil {
					if !stopped.Load() && ctx.Err() == nil {
						res.Errors[tcpKind(err)]++
					}
					continue
				}
				res.Ops++
				res.Latency.Record(time.Since(start))
			}
		}(&results[i])
	}
	wg.Wait()
	total := &TCPResult{Connections: cfg.Connections, Duration: time.Since(t0)}
	for i := range results {
		total.Ops += results[i].Ops
		total.Latency.Merge(&results[i].Latency)
		for k, n := range results[i].Errors {
			total.Errors[k] += n
		}
	}
	return total, nil
}

// errDial marks a failed connect so tcpKind can tell it apart.
type errDial struct{ error }

func (e errDial) Unwrap() error { return e.error }

func tcpKind(err error) ErrorKind {
	var de errDial
	if errors.As(err, &de) {
		return ErrConnect
	}
	return classify(err)
}

// tcpOp is one connect, send, receive, close operation.
func tcpOp(ctx context.Context, d *net.Dialer, cfg TCPConfig, send, recv []byte) error {
	c, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return errDial{err}
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c.SetDeadline(time.Now().Add(cfg.Timeout))
	if _, err := c.Write(send); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	for left := cfg.RecvBytes; left > 0; {
		b := recv
		if left < len(b) {
			b = b[:left]
		}
		n, err := c.Read(b)
		left -= n
		if err != nil {
			if errors.Is(err, io.EOF) && left > 0 {
				return fmt.Errorf("receive: %w: %d bytes missing", errShortBody, left)
			}
			if left > 0 {
				return fmt.Errorf("receive: %w", err)
			}
		}
	}
	return nil
}

// Sink is the server side of the TCP experiment: for every connection it
// reads Recv bytes, writes Send bytes and closes. It stands in for seed
// 002's real server in tests and in `shoal bench sink`.
//
// Serve may run on several listeners at once — a TCP listener for clients
// that connect directly (or through a relaying front) and a handoff socket
// (handoff.FDListener) for connections a front passes over SCM_RIGHTS — so
// one sink is the real server of both of seed 002's set-ups.
type Sink struct {
	// Recv and Send are the request and reply sizes in bytes.
	Recv, Send int
	// Echo replies with the Recv request bytes themselves instead of Send
	// zero bytes, so a test can checksum what came back and know that
	// whatever sits between client and sink (a relaying or handing-off
	// front) moved the payload intact both ways.
	Echo bool

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	closed bool
}

// prereader is a connection that arrives with client bytes already read by
// someone else (handoff.FDConn: what the front read before passing it).
// An interface, not the concrete type, so that loadgen does not depend on
// the handoff package.
type prereader interface{ Preread() []byte }

// Serve accepts connections on ln until Close; it returns nil after Close.
// It may be called for several listeners concurrently.
func (s *Sink) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	if s.lns == nil {
		s.lns = map[net.Listener]struct{}{}
		s.conns = map[net.Conn]struct{}{}
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	reply := make([]byte, s.Send)
	err := accept.Loop(ln, func(c net.Conn) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c, reply)
	}, nil)
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil
	}
	return fmt.Errorf("sink: accept on %s: %w", ln.Addr(), err)
}

func (s *Sink) serve(c net.Conn, reply []byte) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	var pre []byte
	if p, ok := c.(prereader); ok {
		pre = p.Preread()
	}
	if s.Echo {
		buf := make([]byte, max(s.Recv, len(pre)))
		n := copy(buf, pre)
		if _, err := io.ReadFull(c, buf[n:]); err != nil {
			return
		}
		c.Write(buf)
		return
	}
	if want := int64(s.Recv - len(pre)); want > 0 {
		if _, err := io.CopyN(io.Discard, c, want); err != nil {
			return
		}
	}
	c.Write(reply)
}

// Close stops accepting on every listener, closes open connections and
// waits for their goroutines.
func (s *Sink) Close() error {
	s.mu.Lock()
	s.closed = true
	var err error
	for ln := range s.lns {
		if e := ln.Close(); e != nil && err == nil {
			err = e
		}
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}
