//go:build linux

package l4

import (
	"io"
	"net"
	"sync"

	"shoal/internal/cluster/handoff"
)

// pickFor picks a node for client c; when none can take it, it closes c,
// counts the failure and returns -1.
func (f *Front) pickFor(c *net.TCPConn) int {
	i := f.pick()
	if i < 0 {
		c.Close()
		f.failed.Add(1)
	}
	return i
}

// relay forwards one client connection to a node and back until both
// directions have ended.
func (f *Front) relay(c *net.TCPConn) {
	defer f.wg.Done()
	defer f.untrack(c)
	i := f.pickFor(c)
	if i < 0 {
		return
	}
	defer f.done(i)
	bc, err := f.dialer.Dial("tcp", f.cfg.Nodes[i].Addr)
	if err != nil {
		f.nodeFailed(i, err)
		c.Close()
		f.failed.Add(1)
		return
	}
	b := bc.(*net.TCPConn)
	if !f.track(b) {
		b.Close()
		c.Close()
		return
	}
	defer f.untrack(b)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pipe(c, b)
	}()
	pipe(b, c)
	wg.Wait()
	c.Close()
	b.Close()
	f.relayed.Add(1)
}

// pipe copies src to dst — with splice(2): io.Copy into a *net.TCPConn
// from a *net.TCPConn uses ReadFrom, which splices on Linux — and passes
// src's end of file on as a half-close of dst, so a client that sends and
// then shuts down its write side still gets the whole reply. On an error
// (a reset, a write to a closed peer) it closes both connections so that
// the other direction ends too instead of waiting forever.
func pipe(dst, src *net.TCPConn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	dst.CloseWrite()
}

// pass hands one client connection to a node, unread (seed 002 migrates
// right after the handshake), and closes the front's copy: on success the
// node holds the connection, on failure the client sees it end.
func (f *Front) pass(c *net.TCPConn) {
	defer c.Close()
	i := f.pick()
	if i < 0 {
		f.failed.Add(1)
		return
	}
	h := handoff.FDHeader{Kind: handoff.FDHandoff, Node: int32(i), Moves: 1, Conn: f.nextID.Add(1)}
	err := f.clients[i].Send(h, c)
	f.done(i)
	if err != nil {
		f.nodeFailed(i, err)
		f.failed.Add(1)
		return
	}
	f.passed.Add(1)
}
