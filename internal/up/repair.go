package up

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"shoal/internal/cluster/handoff"
)

// RepairConfig tunes StartRepair.
type RepairConfig struct {
	// Exe is the shoal binary to run the front and nodes with. Default:
	// this executable (os.Executable).
	Exe string
	// Stderr receives the front's and nodes' logs. Default os.Stderr.
	Stderr *os.File
	// Log, if set, receives each `ip` command run.
	Log func(cmd string)
	// NodesAccept runs the front with `[repair] accept = "nodes"`: under
	// tbccrd the nodes accept new connections themselves (front.RepairConfig
	// NodesAccept). Default false.
	NodesAccept bool
}

// Repair is a cluster on the repair data path (SPEC §4): a handoff.Lab of
// network namespaces shaped like an LVS direct-routing LAN, a `shoal node
// --repair-listen` process in each node namespace, and `shoal front --path
// repair` in the front namespace on the lab's virtual IP. Cluster.URL is
// the VIP, reachable from this host; Cluster.AdminURL the front's admin API
// on its lab address. Control, Front and Metrics are nil: the front is a
// process of its own.
//
// How the host reaches the VIP. The browser runs in the root namespace, and
// the repair path only works if the client's packets reach the front while
// the nodes' replies (sent from the VIP) reach the client directly. The
// lab's own "client" namespace has exactly that place on the LAN, so the
// host is given one more such place: a veth pair whose root-namespace end
// (HostIf, named like the lab's namespaces) carries HostAddr (.1 of the lab
// prefix) and whose other end is a port of the lab's bridge. The host is
// then just another client on the LAN: ARP for the VIP is answered by the
// front only, the nodes answer the host's MAC straight away, and nothing is
// forwarded or NATed in the root namespace. The alternative, routing the
// VIP via a veth into the client namespace, would make that namespace a
// router for both directions (ip_forward, rp_filter and the nodes' replies
// passing an extra hop) for no gain. The only change to the host's routing
// is the lab's /24 on HostIf; since the lab addresses are the same for every
// lab, StartRepair takes the first 10.201.N.0/24 that no route or address
// of the host touches, and claims it with `ip route add`, which fails if
// another lab added it first. Deleting the lab's namespaces deletes the
// veth pair and with it the address and route, so `shoal lab down --all`
// also clears a lab whose `shoal up` was killed with SIGKILL.
type Repair struct {
	*Procs
	// Lab is the namespaces' topology, with the lab's addresses.
	Lab *handoff.Lab
	// HostIf is the root namespace's end of the veth into the lab's bridge;
	// HostAddr its address.
	HostIf   string
	HostAddr netip.Addr
}

// ErrNeedRoot is returned by StartRepair without the privileges to build
// network namespaces.
var ErrNeedRoot = errors.New("--path repair needs root")

// privileges reports why this process may not build the lab, nil if it
// may. A variable so that tests can pretend.
var privileges = func() error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	return capsAllow(string(b))
}

// capsAllow checks the effective capabilities in a /proc/PID/status text
// for the two the lab needs: CAP_NET_ADMIN (links, addresses, routes,
// steering) and CAP_SYS_ADMIN (`ip netns add` bind-mounts the namespace).
func capsAllow(status string) error {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return fmt.Errorf("CapEff %q: %w", v, err)
		}
		const capNetAdmin, capSysAdmin = 12, 21
		var miss []string
		if caps&(1<<capNetAdmin) == 0 {
			miss = append(miss, "CAP_NET_ADMIN")
		}
		if caps&(1<<capSysAdmin) == 0 {
			miss = append(miss, "CAP_SYS_ADMIN")
		}
		if len(miss) > 0 {
			return fmt.Errorf("this process lacks %s", strings.Join(miss, " and "))
		}
		return nil
	}
	return errors.New("no CapEff line in /proc/self/status")
}

func needRoot(why error) error {
	return fmt.Errorf("%w (%v): it builds network namespaces, a bridge and a veth to this host, and its front "+
		"moves sockets with TCP_REPAIR; run it with sudo (sudo shoal up --path repair), "+
		"or use --path relay, passfd or hybrid, which need no privileges", ErrNeedRoot, why)
}

// Ports inside the namespaces.
const (
	repairNodePort    = 8080 // each node's HTTP port (health checks, relay fallback)
	repairHandoffPort = 7070 // each node's repair handoff port
)

// StartRepair brings up the cluster of cfg on the repair path; see Repair.
// The front listens on the VIP at Config.Listen's port (its host part is
// replaced; port 0 means 8080) and the admin API, unless off, on the front's
// lab address at Config.Admin's port (0 means 9090). It returns once every
// node passed a health check, and removes everything it made when it fails.
func StartRepair(cfg Config, rc RepairConfig) (*Repair, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if cfg.partitioned() {
		return nil, errPartitionedPath
	}
	if err := privileges(); err != nil {
		return nil, needRoot(err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("--path repair builds its network with iproute2's ip command: %w", err)
	}
	listenPort, err := portOf(cfg.Listen, 8080)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	adminPort := 0
	if cfg.Admin != "off" {
		if adminPort, err = portOf(cfg.Admin, 9090); err != nil {
			return nil, fmt.Errorf("--admin: %w", err)
		}
	}
	if rc.Exe == "" {
		if rc.Exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find the shoal binary: %w", err)
		}
	}
	if rc.Stderr == nil {
		rc.Stderr = os.Stderr
	}
	root, info, err := prepareSite(&cfg)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "shoal-up-repair-")
	if err != nil {
		return nil, err
	}
	lab := handoff.NewLab("", cfg.Nodes)
	lab.Log = rc.Log
	r := &Repair{
		Procs:  &Procs{Cluster: &Cluster{Config: cfg, SiteInfo: info, errc: make(chan error, cfg.Nodes+2)}, SocketDir: dir},
		Lab:    lab,
		HostIf: handoff.LabPrefix + lab.ID,
	}
	ok := false
	defer func() {
		if !ok {
			r.Close()
		}
	}()
	ctx := context.Background()

	// The key the front and nodes authenticate handoffs with.
	var key [32]byte
	rand.Read(key[:])
	keyFile := filepath.Join(dir, "repair.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(key[:])+"\n"), 0o600); err != nil {
		return nil, err
	}

	if err := r.joinHost(ctx); err != nil {
		return nil, err
	}

	if err := r.startLab(ctx, rc, root, dir, keyFile, listenPort, adminPort); err != nil {
		return nil, err
	}
	if err := r.waitHealthy(30 * time.Second); err != nil {
		return nil, err
	}
	ok = true
	return r, nil
}

// startLab starts a `shoal node` in each node namespace and `shoal front
// --path repair` on the VIP at listenPort in the front's, its admin API
// on its lab address at adminPort (0: off); all share the key in keyFile.
func (r *Repair) startLab(ctx context.Context, rc RepairConfig, root, dir, keyFile string, listenPort, adminPort int) error {
	cfg, lab := r.Config, r.Lab
	var nodeURLs, addrs []string
	for _, a := range lab.NodeAddrs {
		addrs = append(addrs, netip.AddrPortFrom(a, repairNodePort).String())
	}
	peerArgs, err := r.peerArgs(addrs, false) // the front is not on the nodes' loopback here
	if err != nil {
		return err
	}
	for i, a := range lab.NodeAddrs {
		args := []string{"node", "--root", root,
			"--listen", netip.AddrPortFrom(a, repairNodePort).String(),
			"--repair-listen", netip.AddrPortFrom(a, repairHandoffPort).String(), "--repair-key-file", keyFile,
			"--cache-mb", strconv.Itoa(cfg.CacheMB), "--cache", cfg.Cache}
		args = append(args, peerArgs...)
		newCmd := func() *exec.Cmd { return handoff.Exec(ctx, lab.NodeNS(i), rc.Exe, args...) }
		if err := r.supervise(fmt.Sprintf("node %d", i), newCmd, rc.Stderr); err != nil {
			return err
		}
		nodeURLs = append(nodeURLs, "http://"+netip.AddrPortFrom(a, repairNodePort).String())
	}
	r.NodeURLs = nodeURLs

	vip := netip.AddrPortFrom(lab.VIP, uint16(listenPort))
	adminAddr := ""
	if adminPort != 0 {
		adminAddr = netip.AddrPortFrom(lab.Front, uint16(adminPort)).String()
		r.AdminURL = "http://" + adminAddr
		// On the lab's address the admin API is public: reads need the token too.
		if _, err := r.adminConfig(adminAddr); err != nil {
			return err
		}
	}
	frontCfg := filepath.Join(dir, "front.toml")
	if err := os.WriteFile(frontCfg, []byte(repairFrontConfig(cfg, vip, adminAddr, r.AdminTokenFile, nodeURLs, rc.NodesAccept)), 0o644); err != nil {
		return err
	}
	newFront := func() *exec.Cmd {
		return handoff.Exec(ctx, lab.FrontNS(), rc.Exe, "front", "--config", frontCfg, "--repair-key-file", keyFile)
	}
	if err := r.supervise("front", newFront, rc.Stderr); err != nil {
		return err
	}
	r.URL = "http://" + vip.String() + "/"
	return nil
}

// portOf returns the port of a host:port address, def for port 0.
func portOf(addr string, def int) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return 0, fmt.Errorf("port %q: want 0 to 65535", p)
	}
	if n == 0 {
		n = def
	}
	return n, nil
}

// repairFrontConfig is the front's configuration file (the HMAC key goes
// as a flag): the same policy, cache budget, node cache policy (which the
// tbccrd and weblins mirrors follow) and health checks as the other paths
// of `shoal up`, and the admin token file.
func repairFrontConfig(cfg Config, vip netip.AddrPort, admin, tokenFile string, nodes []string, nodesAccept bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# written by shoal up --path repair\nlisten = %q\nadmin = %q\nadmin_token_file = %q\npolicy = %q\npath = \"repair\"\n",
		vip.String(), admin, tokenFile, cfg.Policy)
	for _, u := range nodes {
		fmt.Fprintf(&b, "\n[[node]]\nurl = %q\n", u)
	}
	fmt.Fprintf(&b, "\n[health]\ninterval = %q\n\n[tuning]\ncache_mb = %d\nnode_cache = %q\n", cfg.HealthInterval.String(), cfg.CacheMB, cfg.Cache)
	if nodesAccept {
		b.WriteString("\n[repair]\naccept = \"nodes\"\n")
	}
	return b.String()
}

// joinHost gives the host its place on the lab's LAN (see Repair): it
// creates the veth pair, claims a free lab prefix with its route, builds
// the lab on that prefix and plugs the pair's other end into the bridge.
func (r *Repair) joinHost(ctx context.Context) error {
	l := r.Lab
	peer := r.HostIf + "p"
	if err := l.Run(ctx, "ip", "link", "add", r.HostIf, "type", "veth", "peer", "name", peer); err != nil {
		return err
	}
	if err := l.Run(ctx, "ip", "link", "set", r.HostIf, "up"); err != nil {
		return err
	}
	third, err := r.claimPrefix(ctx)
	if err != nil {
		return err
	}
	readdressLab(l, third)
	if err := l.Up(ctx); err != nil {
		if errors.Is(err, handoff.ErrNoPrivilege) {
			return needRoot(err)
		}
		return err
	}
	sw := l.SwitchNS()
	for _, s := range [][]string{
		{"ip", "link", "set", peer, "netns", sw},
		{"ip", "-n", sw, "link", "set", peer, "name", "host"},
		{"ip", "-n", sw, "link", "set", "host", "master", "br0", "up"},
	} {
		if err := l.Run(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

// claimPrefix puts HostAddr (10.201.N.1/32) on HostIf and adds the route
// 10.201.N.0/24 via HostIf for the first N that no route or address of the
// host overlaps. `ip route add` fails on an existing route, so two labs
// started at once cannot take the same prefix. It returns N.
func (r *Repair) claimPrefix(ctx context.Context) (byte, error) {
	routes, err := hostPrefixes()
	if err != nil {
		return 0, fmt.Errorf("read the host's routes: %w", err)
	}
	for n := range 256 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 201, byte(n), 0}), 24)
		if overlapsAny(p, routes) {
			continue
		}
		host := netip.AddrFrom4([4]byte{10, 201, byte(n), 1})
		if err := r.Lab.Run(ctx, "ip", "addr", "add", host.String()+"/32", "dev", r.HostIf); err != nil {
			return 0, err
		}
		err := r.Lab.Run(ctx, "ip", "route", "add", p.String(), "dev", r.HostIf, "src", host.String())
		if err == nil {
			r.HostAddr = host
			return byte(n), nil
		}
		r.Lab.Run(ctx, "ip", "addr", "del", host.String()+"/32", "dev", r.HostIf)
		if !strings.Contains(err.Error(), "File exists") {
			return 0, err
		}
	}
	return 0, errors.New("every 10.201.N.0/24 is in use on this host: remove old labs with shoal lab down --all")
}

// hostPrefixes lists the IPv4 prefixes of the host's main routing table
// (/proc/net/route, default route excluded) and of its interface addresses.
func hostPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		dst, err1 := strconv.ParseUint(f[1], 16, 32)
		mask, err2 := strconv.ParseUint(f[7], 16, 32)
		if err1 != nil || err2 != nil || mask == 0 {
			continue
		}
		var d, m [4]byte
		binary.LittleEndian.PutUint32(d[:], uint32(dst))
		binary.LittleEndian.PutUint32(m[:], uint32(mask))
		bits, _ := net.IPMask(m[:]).Size()
		out = append(out, netip.PrefixFrom(netip.AddrFrom4(d), bits))
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP.To4()); ok {
				bits, _ := n.Mask.Size()
				out = append(out, netip.PrefixFrom(ip, bits).Masked())
			}
		}
	}
	return out, nil
}

func overlapsAny(p netip.Prefix, ps []netip.Prefix) bool {
	for _, q := range ps {
		if p.Overlaps(q) {
			return true
		}
	}
	return false
}

// readdressLab moves the lab's addresses from 10.201.0.0/24 to
// 10.201.third.0/24, keeping each host number.
func readdressLab(l *handoff.Lab, third byte) {
	move := func(a netip.Addr) netip.Addr {
		b := a.As4()
		b[2] = third
		return netip.AddrFrom4(b)
	}
	l.Client, l.Front, l.VIP = move(l.Client), move(l.Front), move(l.VIP)
	for i, a := range l.NodeAddrs {
		l.NodeAddrs[i] = move(a)
	}
}

// waitHealthy waits, from the host, until the front accepts on the VIP and
// (with the admin API) every node has passed a health check, or (without)
// a request through the VIP succeeds. A child that exits meanwhile ends the
// wait with its error.
func (r *Repair) waitHealthy(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for last := ""; ; {
		ready, why := r.ready(client)
		if ready {
			return nil
		}
		if why != "" {
			last = why
		}
		select {
		case err := <-r.errc:
			return err
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the repair cluster was not healthy after %v: %s", limit, last)
		}
	}
}

// ready makes one readiness check; why says what is missing.
func (r *Repair) ready(client *http.Client) (bool, string) {
	if r.AdminURL == "" {
		resp, err := client.Get(r.URL)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "GET " + r.URL + ": " + resp.Status
	}
	req, err := http.NewRequest("GET", r.AdminURL+"/nodes", nil)
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+r.AdminToken)
	resp, err := client.Do(req)
	if err != nil {
		return false, "front admin API: " + err.Error()
	}
	defer resp.Body.Close()
	var nodes []struct {
		URL    string          `json:"url"`
		Up     bool            `json:"up"`
		Status json.RawMessage `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&nodes); err != nil {
		return false, "front admin API /nodes: " + err.Error()
	}
	for _, n := range nodes {
		if !n.Up || len(n.Status) == 0 || string(n.Status) == "null" {
			return false, "node " + n.URL + " has not passed a health check"
		}
	}
	if len(nodes) != len(r.NodeURLs) {
		return false, fmt.Sprintf("front knows %d nodes of %d", len(nodes), len(r.NodeURLs))
	}
	c, err := net.DialTimeout("tcp", strings.TrimSuffix(strings.TrimPrefix(r.URL, "http://"), "/"), time.Second)
	if err != nil {
		return false, "front on the VIP: " + err.Error()
	}
	c.Close()
	return true, ""
}

// Shutdown stops the front and nodes (see Procs.Shutdown), then removes
// the lab's namespaces and the host's veth (and with it its address and
// route).
func (r *Repair) Shutdown(ctx context.Context) error {
	err := r.Procs.Shutdown(ctx)
	return errors.Join(err, r.teardown())
}

// Close stops everything at once.
func (r *Repair) Close() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.Shutdown(ctx)
}

func (r *Repair) teardown() error {
	ctx := context.Background()
	var errs []error
	if _, err := net.InterfaceByName(r.HostIf); err == nil {
		if err := r.Lab.Run(ctx, "ip", "link", "del", r.HostIf); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, r.Lab.Down(ctx))
	return errors.Join(errs...)
}
