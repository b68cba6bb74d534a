package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"shoal/internal/l4"
)

// benchL4Front runs internal/l4's raw-TCP front for seed 002's crossover
// experiment (bench/crossover.sh).
func benchL4Front(args []string) error {
	fs := newFlags("bench l4front", "--listen ADDR --path relay|passfd (--nodes HOST:PORT,… | --handoff-sockets PATH,…) [--policy rr]",
		"seed 002's front for raw TCP: relays each connection to a node (splice) or passes its descriptor to the node's handoff socket; runs until interrupted")
	listen := fs.String("listen", "127.0.0.1:8000", "client-facing listen address")
	nodes := fs.String("nodes", "", "comma-separated node addresses host:port (what relay dials)")
	socks := fs.String("handoff-sockets", "", "comma-separated node handoff sockets, in --nodes order (what passfd sends to)")
	path := fs.String("path", "relay", "data path: relay or passfd")
	pol := fs.String("policy", "rr", "node choice, a content-blind internal/policy name (rr, wrr, lc, p2c, …)")
	dialTimeout := fs.Duration("dial-timeout", time.Second, "relay: connect timeout to a node")
	retry := fs.Duration("retry-after", time.Second, "how long a node whose dial or handoff failed stays out of the rotation")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	p, err := l4.ParsePath(*path)
	if err != nil {
		return err
	}
	addrs, paths := splitList(*nodes), splitList(*socks)
	if len(addrs) > 0 && len(paths) > 0 && len(addrs) != len(paths) {
		return fmt.Errorf("%d --nodes but %d --handoff-sockets", len(addrs), len(paths))
	}
	ns := make([]l4.Node, max(len(addrs), len(paths)))
	for i := range ns {
		if i < len(addrs) {
			ns[i].Addr = addrs[i]
		}
		if i < len(paths) {
			ns[i].Socket = paths[i]
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	f, err := l4.New(l4.Config{Nodes: ns, Path: p, Policy: *pol, DialTimeout: *dialTimeout, RetryAfter: *retry, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("l4front: %w", err)
	}
	ctx, cancel := interruptible()
	defer cancel()
	go func() { <-ctx.Done(); f.Close() }()
	log.Info("l4front listening", "addr", ln.Addr().String(), "path", string(p), "policy", *pol, "nodes", len(ns))
	err = f.Serve(ln)
	st := f.Stats()
	log.Info("l4front stopped", "accepted", st.Accepted, "relayed", st.Relayed, "passed", st.Passed, "failed", st.Failed)
	if errors.Is(err, l4.ErrClosed) {
		return nil
	}
	return err
}
