package up

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/admin"
	"shoal/internal/base/content"
	"shoal/internal/base/vhost"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/publish"
	"shoal/internal/gateway"
)

// ProcsConfig selects the multi-process mode of StartProcs.
type ProcsConfig struct {
	// Path is the front's data path: "passfd" or "hybrid" (SPEC §4).
	Path string
	// Exe is the shoal binary to run the nodes with. Default: this
	// executable (os.Executable).
	Exe string
	// Stderr receives the nodes' logs. Default os.Stderr.
	Stderr *os.File
	// Restart says how a node process that dies is restarted;
	// zero fields take RestartConfig's defaults.
	Restart RestartConfig
	// Moves says who moves a connection to the node its next request
	// belongs to under a policy that shares its URL table (tbccrd):
	// the nodes by the table (front.MovesNodes, default) or the front
	// after every request (front.MovesFront).
	Moves front.MoveMode
	// hybridCPU, when set, is the hybrid rule's CPU threshold (percent):
	// tests pin it where the front's CPU, shared with their load, cannot
	// reach or cannot stay below.
	hybridCPU float64
}

// Procs is a cluster whose nodes run as separate processes, each taking
// client connections from the front over its own handoff socket.
type Procs struct {
	*Cluster
	// SocketDir holds the nodes' handoff sockets; removed at Shutdown.
	SocketDir string

	// children supervise the child processes: the nodes by index, then
	// any other (StartRepair's front).
	children []*supervisor
	restart  RestartConfig
	moves    front.MoveMode
	// published: a publish has switched the nodes, so a node restarted
	// now serves the versions folder's "current" (servedRoot).
	published atomic.Bool
}

// StartProcs brings up the cluster of cfg with the front (and admin API) in
// this process and every node as a child process — the shoal binary re-run
// as `shoal node --handoff-socket DIR/nodeI.sock` — so that the front can
// pass client connections to the nodes (passfd) and the nodes answer the
// clients directly, which only means something across processes. The front
// learns each socket from the node's status report. Children get SIGTERM
// if this process dies (Linux Pdeathsig). A node process that dies is
// logged and started again on the same address and socket after a backoff
// (ProcsConfig.Restart), while the front serves from the others; Err does
// not report it, so one node's death never stops the cluster.
func StartProcs(cfg Config, pc ProcsConfig) (*Procs, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if cfg.partitioned() {
		return nil, errPartitionedPath
	}
	mem := cfg.nodeMemory() // each node process plans its own share
	if pc.Path != "passfd" && pc.Path != "hybrid" {
		return nil, fmt.Errorf("--path %q: the multi-process mode needs passfd or hybrid", pc.Path)
	}
	if pc.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the shoal binary: %w", err)
		}
		pc.Exe = exe
	}
	if pc.Stderr == nil {
		pc.Stderr = os.Stderr
	}
	root, info, vm, err := prepareRoot(&cfg)
	if err != nil {
		return nil, err
	}
	if vm != nil && pc.Path == "hybrid" {
		return nil, errors.New("--vhosts works with the relay and passfd paths")
	}
	// Unix socket paths are limited to 107 bytes: keep the folder short.
	dir, err := os.MkdirTemp("", "shoal-up-")
	if err != nil {
		return nil, err
	}
	p := &Procs{Cluster: &Cluster{Config: cfg, SiteInfo: info, SiteRoot: root, sites: siteNames(vm), errc: make(chan error, cfg.Nodes+2)}, SocketDir: dir,
		restart: pc.Restart, moves: pc.Moves}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()

	pubArgs, err := p.publishArgs()
	if err != nil {
		return nil, err
	}
	// Every node learns the others' addresses (peer fetch), so all are
	// chosen first.
	var addrs []string
	for i := range cfg.Nodes {
		addr, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		addrs = append(addrs, addr)
	}
	peerArgs, err := p.peerArgs(addrs, true)
	if err != nil {
		return nil, err
	}
	for i, addr := range addrs {
		sock := filepath.Join(dir, "node"+strconv.Itoa(i)+".sock")
		cmd := func() *exec.Cmd {
			// A node restarted after a publish serves the version last
			// published, not the tree the cluster started with.
			args := append([]string{"node", "--root", p.servedRoot(root), "--listen", addr, "--handoff-socket", sock,
				"--cache", cfg.Cache}, pubArgs...)
			if mem > 0 {
				args = append(args, "--memory", strconv.FormatInt(mem>>10, 10)+"KiB")
			} else {
				args = append(args, "--cache-mb", strconv.Itoa(cfg.CacheMB))
			}
			args = append(args, peerArgs...)
			if vm != nil {
				args = append(args, "--vhosts")
			}
			return exec.Command(pc.Exe, args...)
		}
		if err := p.supervise(fmt.Sprintf("node %d", i), cmd, pc.Stderr); err != nil {
			return nil, err
		}
		u := "http://" + addr
		p.NodeURLs = append(p.NodeURLs, u)
	}
	for i, u := range p.NodeURLs {
		if err := waitListening(u[len("http://"):], 10*time.Second); err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
	}

	if err := p.startFront(root, pc, vm, pubArgs != nil); err != nil {
		return nil, err
	}
	ok = true
	return p, nil
}

// startFront starts the front over the node processes on the passfd or
// hybrid path (hybrid's size table from root) and, with publish, the
// publisher that drives the nodes.
func (p *Procs) startFront(root string, pc ProcsConfig, vm *vhost.Map, publish bool) error {
	pass := front.PassFD(front.PassFDConfig{HandoffDir: p.SocketDir, Moves: p.moves})
	gc := gateway.Config{Path: pass, VHosts: vm}
	if pc.Path == "hybrid" {
		gc.Hybrid.CPUPercent = pc.hybridCPU
		st, err := content.Open(root)
		if err != nil {
			return err
		}
		gc.Path, gc.Choose, gc.Sizes = front.Relay(), front.Hybrid(pass), st
		gc.Hybrid.Size = func(url string) int64 {
			if e, err := st.Lookup(url); err == nil && !e.IsDir {
				return e.Size
			}
			return -1
		}
	}
	if err := p.startGateway(gc, false); err != nil {
		return err
	}
	if publish {
		if err := p.startRemotePublisher(root); err != nil {
			return err
		}
	}
	return p.serve()
}

// supervise starts the command newCmd makes as a child of the cluster
// with its output on w, and keeps it running: when it dies, the death is
// logged and a fresh command from newCmd is started after a backoff
// (Procs' RestartConfig); Shutdown stops it. The child gets SIGTERM if this
// process dies (Linux Pdeathsig; `ip netns exec` keeps it across its exec),
// and runs in a process group of its own, so a terminal's Ctrl-C reaches
// only this process, which then stops the children in order rather than
// racing them.
func (p *Procs) supervise(name string, newCmd func() *exec.Cmd, w *os.File) error {
	start := func() (process, error) {
		cmd := newCmd()
		cmd.Stdout, cmd.Stderr = w, w
		cmd.SysProcAttr = childAttr()
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return cmdProcess{cmd}, nil
	}
	sv, err := newSupervisor(name, start, p.restart, realClock{}, p.Config.Logger)
	if err != nil {
		return err
	}
	p.children = append(p.children, sv)
	return nil
}

// Shutdown stops the front and admin API (letting in-flight requests
// finish), then stops supervising and sends SIGTERM to every child process,
// waiting for them until ctx ends, when the rest are killed. The socket
// folder is removed.
func (p *Procs) Shutdown(ctx context.Context) error {
	err := p.Cluster.Shutdown(ctx)
	var wg sync.WaitGroup
	for _, sv := range p.children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sv.Stop(ctx)
		}()
	}
	wg.Wait()
	os.RemoveAll(p.SocketDir)
	return err
}

// Close stops everything at once.
func (p *Procs) Close() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Shutdown(ctx)
}

// freePort returns a loopback address with a port that was free a moment
// ago (the node binds it right after; a clash makes StartProcs fail).
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitListening waits until addr accepts a TCP connection.
func waitListening(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after %v: %w", addr, limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// publishArgs prepares publishing to node processes — the versions folder
// and the admin token they check — and returns the node flags that enable
// it; nil with the admin API off (no token, no `shoal publish`).
func (p *Procs) publishArgs() ([]string, error) {
	if p.Config.Admin == "off" {
		return nil, nil
	}
	dir, err := p.publishDir()
	if err != nil {
		return nil, err
	}
	if _, err := admin.LoadOrCreateToken(p.Config.AdminTokenFile); err != nil {
		return nil, err
	}
	return []string{"--publish-dir", dir, "--admin-token-file", p.Config.AdminTokenFile}, nil
}

// startRemotePublisher drives the node processes through their publish
// endpoint; the front follows each version once the nodes switched
// (gateway.Committed: hybrid's sizes, the policy's tables).
func (p *Procs) startRemotePublisher(root string) error {
	tok, err := admin.LoadOrCreateToken(p.Config.AdminTokenFile)
	if err != nil {
		return err
	}
	urls := p.NodeURLs
	c, err := publish.New(publish.Config{Versions: p.pubdir, Current: root, Logger: p.Config.Logger,
		Nodes: func() []publish.Participant {
			ps := make([]publish.Participant, len(urls))
			for i, u := range urls {
				ps[i] = publish.Remote(u, tok, nil)
			}
			return ps
		},
		OnCommit: func(_ uint64, root string, d content.Diff) {
			p.committed(root, d)
			p.published.Store(true)
		}})
	p.Publisher = c
	return err
}

// servedRoot is the tree a node (re)started now must serve: the version
// last published, or root before any publish.
func (p *Procs) servedRoot(root string) string {
	if p.published.Load() {
		return filepath.Join(p.pubdir, publish.CurrentLink)
	}
	return root
}
