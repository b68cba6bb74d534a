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
	"time"

	"shoal/internal/cluster"
	"shoal/internal/content"
	"shoal/internal/front"
	"shoal/internal/policy"
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
	// Restart says how a node process that dies is restarted (issue 10,
	// item 5); zero fields take RestartConfig's defaults.
	Restart RestartConfig
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
	pol, err := policy.New(cfg.Policy, policy.Config{CacheBytes: int64(cfg.CacheMB) << 20})
	if err != nil {
		return nil, err
	}
	// Unix socket paths are limited to 107 bytes: keep the folder short.
	dir, err := os.MkdirTemp("", "shoal-up-")
	if err != nil {
		return nil, err
	}
	p := &Procs{Cluster: &Cluster{Config: cfg, SiteInfo: info, errc: make(chan error, cfg.Nodes+2)}, SocketDir: dir,
		restart: pc.Restart}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()

	var specs []cluster.NodeSpec
	for i := range cfg.Nodes {
		addr, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		args := []string{"node", "--root", root, "--listen", addr,
			"--handoff-socket", filepath.Join(dir, "node"+strconv.Itoa(i)+".sock"),
			"--cache-mb", strconv.Itoa(cfg.CacheMB), "--cache", cfg.Cache}
		if vm != nil {
			args = append(args, "--vhosts")
		}
		if err := p.supervise(fmt.Sprintf("node %d", i), func() *exec.Cmd { return exec.Command(pc.Exe, args...) }, pc.Stderr); err != nil {
			return nil, err
		}
		u := "http://" + addr
		p.NodeURLs = append(p.NodeURLs, u)
		specs = append(specs, cluster.NodeSpec{URL: u})
	}
	for i, u := range p.NodeURLs {
		if err := waitListening(u[len("http://"):], 10*time.Second); err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
	}

	c := p.Cluster
	if err := c.startControl(pol, specs); err != nil {
		return nil, err
	}

	fc := front.Config{Path: front.PassFD(front.PassFDConfig{HandoffDir: dir}), VHosts: vm}
	if pc.Path == "hybrid" {
		st, err := content.Open(root)
		if err != nil {
			return nil, err
		}
		fc.Path = front.Relay()
		fc.Choose = front.Hybrid(front.PassFD(front.PassFDConfig{HandoffDir: dir}))
		fc.Hybrid.Size = func(url string) int64 {
			if e, err := st.Lookup(url); err == nil && !e.IsDir {
				return e.Size
			}
			return -1
		}
	}
	if err := c.startFront(fc); err != nil {
		return nil, err
	}
	ok = true
	return p, nil
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
