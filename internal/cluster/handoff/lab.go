package handoff

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Lab is the repair path's test topology: one LAN inside network namespaces,
// shaped like an LVS direct-routing cluster (seed 002 §4 used one front and
// two real servers on a LAN).
//
//	             ns <id>-sw: bridge br0 (no address)
//	   ┌─────────────┬───────────┼────────────┬─────────────┐
//	<id>-client   <id>-front   <id>-node1   <id>-node2   <id>-node3
//	10.201.0.2    10.201.0.3   10.201.0.11  10.201.0.12  10.201.0.13
//	              + VIP on eth0  + VIP on lo, arp_ignore=1, arp_announce=2
//
// Every host has one veth "eth0" into the bridge. The virtual IP (VIP,
// 10.201.0.100) is in the LAN's prefix, so the client reaches it on-link;
// only the front answers ARP for it, because the nodes hold it on lo with
// arp_ignore=1 (reply only for addresses on the asking interface) and
// arp_announce=2 (never use the VIP as an ARP source). A node's replies
// leave from the VIP and go straight to the client's MAC: they never pass
// the front. The front forwards the flows it handed off (ip_forward=1,
// send_redirects=0 so it does not tell the client to bypass it).
//
// The bridge lives in its own namespace rather than the root one, so
// nothing about the lab is visible on the host and parallel labs (different
// ids) use the same addresses without colliding. Everything is created with
// iproute2's `ip` command rather than a netlink library: the lab is built
// once per test, the commands are exactly what an operator would type to
// reproduce it, and `ip netns exec` is the simplest correct way to run a
// process (front, node, client) inside a namespace — Go's threads cannot
// safely change namespace without LockOSThread on every goroutine.
type Lab struct {
	// ID prefixes every namespace name ("shoal-<ID>-front").
	ID string
	// Nodes is the number of node namespaces (default 3).
	Nodes int

	Client, Front netip.Addr
	NodeAddrs     []netip.Addr
	VIP           netip.Addr

	// Log, if set, receives each command run.
	Log func(cmd string)
}

// LabPrefix starts every lab namespace name, so `shoal lab down --all`
// can find leftovers.
const LabPrefix = "shoal-"

// NewLab returns the description of a lab with the given id (a random one
// if empty) and node count; nothing is created until Up.
func NewLab(id string, nodes int) *Lab {
	if id == "" {
		var b [3]byte
		rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	if nodes <= 0 {
		nodes = 3
	}
	l := &Lab{
		ID:     id,
		Nodes:  nodes,
		Client: netip.MustParseAddr("10.201.0.2"),
		Front:  netip.MustParseAddr("10.201.0.3"),
		VIP:    netip.MustParseAddr("10.201.0.100"),
	}
	for i := range nodes {
		l.NodeAddrs = append(l.NodeAddrs, netip.AddrFrom4([4]byte{10, 201, 0, byte(11 + i)}))
	}
	return l
}

// Namespace names.
func (l *Lab) ns(name string) string { return LabPrefix + l.ID + "-" + name }

// ClientNS, FrontNS and SwitchNS name the client's, the front's and the
// bridge's namespaces; NodeNS(i) the i-th node's (0-based).
func (l *Lab) ClientNS() string    { return l.ns("client") }
func (l *Lab) FrontNS() string     { return l.ns("front") }
func (l *Lab) SwitchNS() string    { return l.ns("sw") }
func (l *Lab) NodeNS(i int) string { return l.ns(fmt.Sprintf("node%d", i+1)) }

// Namespaces lists all of the lab's namespaces, bridge first.
func (l *Lab) Namespaces() []string {
	out := []string{l.SwitchNS(), l.ClientNS(), l.FrontNS()}
	for i := range l.Nodes {
		out = append(out, l.NodeNS(i))
	}
	return out
}

func (l *Lab) run(ctx context.Context, args ...string) error {
	if l.Log != nil {
		l.Log(strings.Join(args, " "))
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("lab: %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// Run runs one command (an `ip …` step) the way Up does: logged to Log,
// its output in the error. Callers that extend the lab (internal/up joins
// the host to its bridge) use it so their steps read like the lab's own.
func (l *Lab) Run(ctx context.Context, args ...string) error { return l.run(ctx, args...) }

// ErrNoPrivilege says the process may not create network namespaces
// (no CAP_NET_ADMIN/CAP_SYS_ADMIN): tests skip on it.
var ErrNoPrivilege = errors.New("lab: creating network namespaces is not permitted")

// Up creates the topology. On failure it removes what it made.
func (l *Lab) Up(ctx context.Context) (err error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("lab: iproute2 `ip` not found: %w", err)
	}
	defer func() {
		if err != nil {
			l.Down(context.WithoutCancel(ctx))
		}
	}()
	for i, ns := range l.Namespaces() {
		if err := l.run(ctx, "ip", "netns", "add", ns); err != nil {
			if i == 0 && (strings.Contains(err.Error(), "Operation not permitted") || strings.Contains(err.Error(), "Permission denied")) {
				return fmt.Errorf("%w: %v", ErrNoPrivilege, err)
			}
			return err
		}
	}
	sw := l.SwitchNS()
	steps := [][]string{
		{"ip", "-n", sw, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", sw, "link", "set", "br0", "up"},
	}
	type host struct {
		ns   string
		addr netip.Addr
		port string
	}
	hosts := []host{{l.ClientNS(), l.Client, "client"}, {l.FrontNS(), l.Front, "front"}}
	for i, a := range l.NodeAddrs {
		hosts = append(hosts, host{l.NodeNS(i), a, fmt.Sprintf("node%d", i+1)})
	}
	for _, h := range hosts {
		steps = append(steps,
			[]string{"ip", "link", "add", "eth0", "netns", h.ns, "type", "veth", "peer", "name", h.port, "netns", sw},
			[]string{"ip", "-n", sw, "link", "set", h.port, "master", "br0", "up"},
			[]string{"ip", "-n", h.ns, "link", "set", "lo", "up"},
			[]string{"ip", "-n", h.ns, "addr", "add", h.addr.String() + "/24", "dev", "eth0"},
			[]string{"ip", "-n", h.ns, "link", "set", "eth0", "up"},
		)
	}
	vip := l.VIP.String() + "/32"
	steps = append(steps,
		[]string{"ip", "-n", l.FrontNS(), "addr", "add", vip, "dev", "eth0"},
		[]string{"ip", "netns", "exec", l.FrontNS(), "sysctl", "-q", "-w",
			"net.ipv4.ip_forward=1",
			"net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.default.send_redirects=0",
			"net.ipv4.conf.eth0.send_redirects=0",
			"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0"},
	)
	for i := range l.NodeAddrs {
		ns := l.NodeNS(i)
		steps = append(steps,
			[]string{"ip", "netns", "exec", ns, "sysctl", "-q", "-w",
				"net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2",
				"net.ipv4.conf.eth0.arp_ignore=1", "net.ipv4.conf.eth0.arp_announce=2"},
			[]string{"ip", "-n", ns, "addr", "add", vip, "dev", "lo"},
		)
	}
	for _, s := range steps {
		if err := l.run(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

// Down deletes every namespace of the lab (and with them the veths, the
// bridge, addresses, routes and any process-less state). Processes still
// running inside are the caller's to stop first. Missing namespaces are not
// an error, so Down is safe to call twice.
func (l *Lab) Down(ctx context.Context) error {
	var errs []error
	for _, ns := range l.Namespaces() {
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); err != nil {
			continue
		}
		if err := l.run(ctx, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Exec returns a command that runs name with args inside namespace ns
// (`ip netns exec ns name args...`).
func Exec(ctx context.Context, ns, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// LabIDs lists the ids of labs that have namespaces on this host.
func LabIDs() ([]string, error) {
	ents, err := os.ReadDir("/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	seen := map[string]bool{}
	var ids []string
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), LabPrefix)
		if !ok {
			continue
		}
		i := strings.LastIndexByte(name, '-')
		if i <= 0 || seen[name[:i]] {
			continue
		}
		seen[name[:i]] = true
		ids = append(ids, name[:i])
	}
	return ids, nil
}

// LabFromNamespaces rebuilds a Lab for an id found by LabIDs, counting its
// node namespaces, so that Down removes all of them.
func LabFromNamespaces(id string) *Lab {
	n := 0
	for {
		if _, err := os.Stat(filepath.Join("/run/netns", LabPrefix+id+fmt.Sprintf("-node%d", n+1))); err != nil {
			break
		}
		n++
	}
	l := NewLab(id, max(n, 1))
	l.Nodes = n
	l.NodeAddrs = l.NodeAddrs[:n]
	return l
}
