package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"shoal/internal/base/content"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/node"
	"shoal/internal/cluster/policy"
	"shoal/internal/config"
)

// Flags and wiring of the same-host handoff data paths (passfd, hybrid),
// shared by `shoal front --path passfd|hybrid` and `shoal node
// --handoff-socket`.

type passfdFrontFlags struct {
	cpu    *float64
	conns  *int64
	sizeKB *int64
	site   *string
	// sizes is hybrid's table of object sizes from --site, moved to each
	// version `shoal publish` switches the nodes to.
	sizes *content.Store
}

func addPassFDFrontFlags(fs *flag.FlagSet, def config.Front) *passfdFrontFlags {
	return &passfdFrontFlags{
		cpu:    fs.Float64("hybrid-cpu", def.Hybrid.CPUPercent, "--path hybrid: hand off while the front's CPU is above this percent of one core (negative: off)"),
		conns:  fs.Int64("hybrid-conns", def.Hybrid.Conns, "--path hybrid: hand off while more client connections than this are open (negative: off)"),
		sizeKB: fs.Int64("hybrid-size-kb", def.Hybrid.SizeKB, "--path hybrid: hand off objects of at least this many KiB (negative: off; sizes come from the nodes' size index, or --site)"),
		site:   fs.String("site", def.Hybrid.Site, "--path hybrid: the nodes' site root on this host, whose URL table gives object sizes (with --vhosts, the folder of site folders)"),
	}
}

// dataPath builds the passfd or hybrid path. Both learn each node's socket
// from its status report, so health checks must be on.
func (pf *passfdFrontFlags) dataPath(path string, health time.Duration, fc config.Front) (front.DataPath, func(policy.Decision, *front.Exchange) front.DataPath, front.HybridConfig, error) {
	hc := front.HybridConfig{CPUPercent: *pf.cpu, ActiveConns: *pf.conns, MinSize: *pf.sizeKB << 10}
	if health <= 0 {
		return nil, nil, hc, fmt.Errorf("--path %s learns the nodes' handoff sockets from health checks: set --health-interval", path)
	}
	pc := front.PassFDConfig{HandoffDir: fc.HandoffDir, HandoffUID: fc.HandoffUID}
	var err error
	if pc.Moves, err = front.ParseMoveMode(fc.PassFDMoves); err != nil {
		return nil, nil, hc, err
	}
	if path == "passfd" {
		return front.PassFD(pc), nil, hc, nil
	}
	if *pf.site != "" {
		st, err := content.Open(*pf.site)
		if err != nil {
			return nil, nil, hc, fmt.Errorf("--site: %w", err)
		}
		pf.sizes = st
		hc.Size = func(url string) int64 {
			if !strings.HasPrefix(url, "/") {
				// With vhosts the key is site + path, and --site the
				// folder of site folders: the file is at /site/path.
				url = "/" + url
			}
			e, err := st.Lookup(url)
			if err != nil || e.IsDir {
				return -1
			}
			return e.Size
		}
	}
	return front.Relay(), front.Hybrid(front.PassFD(pc)), hc, nil
}

func addPassFDNodeFlag(fs *flag.FlagSet) *string {
	return fs.String("handoff-socket", "", "Unix socket on which a front on this host hands client connections over (--path passfd); reported in /.shoal/status")
}

// absSocket makes a handoff socket path absolute, since it is reported to
// fronts that may run in another directory.
func absSocket(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	p, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("--handoff-socket: %w", err)
	}
	return p, nil
}

// startPassFDNode listens on the node's handoff socket and serves what
// arrives on it; srv.Shutdown closes it.
func startPassFDNode(srv *node.Server, path string, logf func(msg string, args ...any)) error {
	if path == "" {
		return nil
	}
	hl, err := handoff.ListenFD(path)
	if err != nil {
		return err
	}
	logf("accepting handed-off connections", "socket", path)
	go srv.Serve(hl)
	return nil
}
