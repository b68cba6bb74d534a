//go:build linux

package handoff

import (
	"net/netip"
	"strings"
	"testing"
)

// NewRepairMover refuses configurations it cannot steer before touching the
// kernel; the moving itself is tested in a lab by internal/cluster/l4.
func TestRepairMoverConfig(t *testing.T) {
	vip := netip.MustParseAddrPort("10.9.0.100:80")
	node := netip.MustParseAddrPort("10.9.0.11:7070")
	for _, c := range []struct {
		name string
		cfg  RepairMoverConfig
		want string
	}{
		{"no VIP port", RepairMoverConfig{Key: labKey, VIP: netip.AddrPortFrom(vip.Addr(), 0), Nodes: []netip.AddrPort{node}}, "VIP"},
		{"IPv6 VIP", RepairMoverConfig{Key: labKey, VIP: netip.MustParseAddrPort("[::1]:80"), Nodes: []netip.AddrPort{node}}, "VIP"},
		{"node without port", RepairMoverConfig{Key: labKey, VIP: vip, Nodes: []netip.AddrPort{netip.AddrPortFrom(node.Addr(), 0)}}, "node 0"},
		{"short key", RepairMoverConfig{Key: []byte("short"), VIP: vip, Dev: "lo", Nodes: []netip.AddrPort{node}}, "key"},
	} {
		m, err := NewRepairMover(c.cfg)
		if err == nil {
			m.Close()
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not mention %q", c.name, err, c.want)
		}
	}
}
