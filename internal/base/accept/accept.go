// Package accept is the one rule every shoal listener follows when Accept
// fails (the front's, the nodes', the layer-4 front's, the handoff and
// repair ports', the PoP peer port's): an error other than the listener
// being closed — out of descriptors or memory (EMFILE, ENFILE, ENOBUFS,
// ENOMEM), a timeout — leaves the port open and is retried after a wait of
// 5 ms doubling to 1 s, net/http's, reset by the next connection. HAProxy
// likewise pauses a listener that runs out of descriptors instead of
// closing it: a port that stops accepting on a transient error is an outage.
//
// Listeners served by net/http or another library (the admin API, a PoP's
// edge, the DNS responder's TCP port) take their bounds here too (Limits,
// Bound): a total and per-address connection bound, idle connections shed
// to make room, header, read, idle and per-write timeouts.
package accept

import (
	"errors"
	"net"
	"time"
)

// Backoff is the wait before retrying a failed Accept. The zero value is
// ready: the first wait is 5 ms, each next one doubles, up to 1 s.
type Backoff struct{ d time.Duration }

// Backoff's first and longest waits.
const (
	FirstWait = 5 * time.Millisecond
	MaxWait   = time.Second
)

// Next returns the wait for one more failure in a row.
func (b *Backoff) Next() time.Duration {
	b.d = min(max(2*b.d, FirstWait), MaxWait)
	return b.d
}

// Wait sleeps for one more failure in a row, telling retry (may be nil)
// the error and the wait first.
func (b *Backoff) Wait(err error, retry func(err error, wait time.Duration)) {
	d := b.Next()
	if retry != nil {
		retry(err, d)
	}
	time.Sleep(d)
}

// Reset starts over after an accept succeeded.
func (b *Backoff) Reset() { b.d = 0 }

// Closed reports whether an Accept error means the listener was closed,
// the one error that ends an accept loop.
func Closed(err error) bool { return errors.Is(err, net.ErrClosed) }

// Loop accepts connections from ln and passes each to handle (on the
// loop's goroutine: start one for slow work) until ln is closed, then
// returns the error Accept gave. Any other error is retried after
// Backoff's wait; retry (may be nil) hears each one first, to log it.
func Loop(ln net.Listener, handle func(net.Conn), retry func(err error, wait time.Duration)) error {
	var b Backoff
	for {
		c, err := ln.Accept()
		if err != nil {
			if Closed(err) {
				return err
			}
			b.Wait(err, retry)
			continue
		}
		b.Reset()
		handle(c)
	}
}
