//go:build linux

package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/l4"
)

// benchL4Front runs internal/cluster/l4's raw-TCP front for seed 002's crossover
// experiment (bench/crossover.sh).
func benchL4Front(args []string) error {
	fs := newFlags("bench l4front", "--listen ADDR --path relay|passfd|repair (--nodes HOST:PORT,… | --handoff-sockets PATH,… | --repair-nodes IP:PORT,… --repair-key-file FILE) [--policy rr]",
		"a layer-4 front for raw TCP: relays each connection to a node (splice), passes its descriptor to the node's handoff socket (same host), "+
			"or moves it to a node on another host with TCP_REPAIR and per-flow steering (--path repair: --listen must be the VIP:port, which the nodes hold on lo; "+
			"needs CAP_NET_ADMIN); runs until interrupted")
	listen := fs.String("listen", "127.0.0.1:8000", "client-facing listen address (repair: the VIP:port)")
	nodes := fs.String("nodes", "", "comma-separated node addresses host:port (what relay dials)")
	socks := fs.String("handoff-sockets", "", "comma-separated node handoff sockets, in --nodes order (what passfd sends to)")
	repairNodes := fs.String("repair-nodes", "", "comma-separated node repair handoff ports IPv4:port (bench sink --repair-listen; what repair sends to)")
	keyFile := fs.String("repair-key-file", "", "repair: file holding the cluster key shared with the nodes (≥16 bytes)")
	dev := fs.String("repair-dev", "", "repair: interface towards the nodes (default: the one holding the listen address)")
	steer := fs.String("repair-steer", "auto", "repair: per-flow steering: bpf (TCX program, kernel ≥ 6.6), nftables, or auto (bpf, else nftables)")
	repairTimeout := fs.Duration("repair-timeout", 2*time.Second, "repair: bound on one handoff (dial, send, the node's answer)")
	path := fs.String("path", "relay", "data path: relay, passfd or repair")
	pol := fs.String("policy", "rr", "node choice, a content-blind internal/cluster/policy name (rr, wrr, lc, p2c, …)")
	dialTimeout := fs.Duration("dial-timeout", time.Second, "relay: connect timeout to a node")
	retry := fs.Duration("retry-after", time.Second, "how long a node whose dial or handoff failed stays out of the rotation")
	logf := addLogFlags(fs)
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
	lists := [][]string{splitList(*nodes), splitList(*socks), splitList(*repairNodes)}
	n := 0
	for _, l := range lists {
		if len(l) > 0 && n > 0 && len(l) != n {
			return fmt.Errorf("--nodes, --handoff-sockets and --repair-nodes name %d, %d and %d nodes; give each node in all that are set",
				len(lists[0]), len(lists[1]), len(lists[2]))
		}
		n = max(n, len(l))
	}
	ns := make([]l4.Node, n)
	for i := range ns {
		if i < len(lists[0]) {
			ns[i].Addr = lists[0][i]
		}
		if i < len(lists[1]) {
			ns[i].Socket = lists[1][i]
		}
		if i < len(lists[2]) {
			ns[i].Repair = lists[2][i]
		}
	}
	cfg := l4.Config{Nodes: ns, Path: p, Policy: *pol, DialTimeout: *dialTimeout, RetryAfter: *retry}
	if p == l4.Repair {
		key, err := readRepairKey(*keyFile)
		if err != nil {
			return err
		}
		vip, err := netip.ParseAddrPort(*listen)
		if err != nil {
			return fmt.Errorf("--path repair: --listen must be VIP:port, got %q: %w", *listen, err)
		}
		cfg.Repair = l4.RepairConfig{Key: key, VIP: vip, Dev: *dev, Timeout: *repairTimeout,
			Steer: handoff.SteerConfig{Backend: *steer}}
	}
	log, err := logf.logger(os.Stderr, "l4front", "", "")
	if err != nil {
		return err
	}
	cfg.Logger = log
	f, err := l4.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		f.Close()
		return fmt.Errorf("l4front: %w", err)
	}
	ctx, cancel := interruptible()
	defer cancel()
	go func() { <-ctx.Done(); f.Close() }()
	log.Info("l4front listening", "addr", ln.Addr().String(), "path", string(p), "policy", *pol, "nodes", len(ns), "backend", f.SteerBackend())
	err = f.Serve(ln)
	st := f.Stats()
	log.Info("l4front stopped", "accepted", st.Accepted, "relayed", st.Relayed, "passed", st.Passed, "failed", st.Failed,
		"fin_handoff", st.Ended, "steered", st.Steered)
	if errors.Is(err, l4.ErrClosed) {
		return nil
	}
	return err
}
