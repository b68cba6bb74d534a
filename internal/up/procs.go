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
	"syscall"
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
}

// Procs is a cluster whose nodes run as separate processes, each taking
// client connections from the front over its own handoff socket.
type Procs struct {
	*Cluster
	// SocketDir holds the nodes' handoff sockets; removed at Shutdown.
	SocketDir string

	mu    sync.Mutex
	cmds  []*exec.Cmd
	waits []chan struct{}
	stop  bool
}

// StartProcs brings up the cluster of cfg with the front (and admin API) in
// this process and every node as a child process — the shoal binary re-run
// as `shoal node --handoff-socket DIR/nodeI.sock` — so that the front can
// pass client connections to the nodes (passfd) and the nodes answer the
// clients directly, which only means something across processes. The front
// learns each socket from the node's status report. Children get SIGTERM
// if this process dies (Linux Pdeathsig).
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
	p := &Procs{Cluster: &Cluster{Config: cfg, SiteInfo: info, errc: make(chan error, cfg.Nodes+2)}, SocketDir: dir}
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
		cmd := exec.Command(pc.Exe, "node", "--root", root, "--listen", addr,
			"--handoff-socket", filepath.Join(dir, "node"+strconv.Itoa(i)+".sock"),
			"--cache-mb", strconv.Itoa(cfg.CacheMB), "--cache", cfg.Cache)
		if vm != nil {
			cmd.Args = append(cmd.Args, "--vhosts")
		}
		if err := p.spawn(fmt.Sprintf("node %d", i), cmd, pc.Stderr); err != nil {
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

// spawn starts cmd as a child of the cluster with its output on w. The
// child gets SIGTERM if this process dies (Linux Pdeathsig; `ip netns exec`
// keeps it across its exec), Shutdown stops it, and an exit that Shutdown
// did not ask for is reported on Err as name's. It runs in a process group
// of its own, so a terminal's Ctrl-C reaches only this process, which then
// stops the children in order rather than racing them.
func (p *Procs) spawn(name string, cmd *exec.Cmd, w *os.File) error {
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmds, p.waits = append(p.cmds, cmd), append(p.waits, done)
	p.mu.Unlock()
	go p.reap(name, cmd, done)
	return nil
}

// reap waits for a child process and reports an exit that Shutdown did not
// ask for.
func (p *Procs) reap(name string, cmd *exec.Cmd, done chan struct{}) {
	err := cmd.Wait()
	close(done)
	p.mu.Lock()
	stopping := p.stop
	p.mu.Unlock()
	if !stopping {
		if err == nil {
			err = errors.New("exited")
		}
		select {
		case p.errc <- fmt.Errorf("%s (pid %d): %w", name, cmd.Process.Pid, err):
		default:
		}
	}
}

// Shutdown stops the front and admin API (letting in-flight requests
// finish), then sends SIGTERM to every child process and waits for them
// until ctx ends, when the rest are killed. The socket folder is removed.
func (p *Procs) Shutdown(ctx context.Context) error {
	err := p.Cluster.Shutdown(ctx)
	p.mu.Lock()
	p.stop = true
	cmds, waits := p.cmds, p.waits
	p.mu.Unlock()
	for _, cmd := range cmds {
		cmd.Process.Signal(syscall.SIGTERM)
	}
	for i, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			cmds[i].Process.Kill()
			<-w
		}
	}
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
