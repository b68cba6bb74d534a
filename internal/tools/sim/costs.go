package sim

import (
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/BurntSushi/toml"

	"shoal/internal/cluster/policy"
)

// Costs is every time and byte cost the simulator charges. The zero value is
// not useful; start from DefaultCosts and override fields (LoadCosts reads a
// TOML file of overrides, the CLI binds every field to a flag via Fields).
//
// Node costs are LARD's simulation model (Pai et al. 1998, SPEC §6): a request
// costs ConnSetup + ⌈size/512⌉·TransmitPer512 + ConnTeardown of CPU, plus, when
// it is not in memory, a disk read of DiskLatency + ⌈size/4 KiB⌉·DiskPer4K +
// ⌈(size − 44 KiB)/44 KiB⌉·DiskPerExtra44K (the last term only above 44 KiB).
// Check: an 8 KiB file from memory costs 145 + 16·40 + 145 = 930 µs, that is
// 1075 requests/s per node.
//
// Front costs are seed 000 §3.1. The paper gives only ratios — Tconn and
// Thandoff are at least 15·Ttransfer, Tdispatch is 10–20 % of Thandoff — so the
// absolute scale is ours: Ttransfer = 8 µs per forwarded packet (a 2000s
// front forwarding ~125 k packets/s), Tconn = Thandoff = 15·Ttransfer =
// 120 µs, Tdispatch = 15 % of Thandoff = 18 µs. Then per request
//
//	l7  (relay/LARD front, T1) = Tconn + Thandoff + Tdispatch + Ttransfer = 266 µs (3 759 req/s)
//	tag (TB-CCRD front, T2)    = 4·Ttransfer + Tdispatch                  =  50 µs (20 000 req/s)
//	l4  (layer-4 switch)       = 4·Ttransfer + L4Dispatch                 =  40 µs (25 000 req/s)
//
// so T1/T2 = 5.3, the seed's "more than 5 times".
//
// Handoff costs on the nodes (tbccrd's holder → tag move, weblins' first
// member → owner move) are also from seed 000's Thandoff: the node giving a
// connection away pays ConnSetup (it accepted the connection) + HandoffOut
// (120 µs = Thandoff), the node taking it pays HandoffIn instead of ConnSetup
// (145 µs: rebuilding a connection costs about what accepting one does). A
// node behind an l7 front also takes every connection by handoff, so it pays
// HandoffIn, which by default equals ConnSetup and leaves LARD's model intact.
//
// Internal bytes (seed 000 §3.2): a SCARD-style location query 84 B + reply
// 72 B; a TB-CCRD tag of 6 B on ~6 client packets = 36 B. Peer-memory fetches
// (weblins) move the object itself over the internal network and cost the
// sending node PeerPer512 of CPU per 512 B, and the receiving node the same.
type Costs struct {
	// ConnSetup is the node CPU to accept a connection and parse the request.
	ConnSetup time.Duration `toml:"conn_setup"`
	// ConnTeardown is the node CPU to close a connection.
	ConnTeardown time.Duration `toml:"conn_teardown"`
	// TransmitPer512 is the node CPU to send 512 bytes of response.
	TransmitPer512 time.Duration `toml:"transmit_per_512"`
	// DiskLatency is the seek and rotation of one disk read.
	DiskLatency time.Duration `toml:"disk_latency"`
	// DiskPer4K is the disk transfer time of 4 KiB.
	DiskPer4K time.Duration `toml:"disk_per_4k"`
	// DiskPerExtra44K is the extra seek charged per 44 KiB above the first 44 KiB.
	DiskPerExtra44K time.Duration `toml:"disk_per_extra_44k"`
	// HandoffOut is the node CPU to hand a connection to another node.
	HandoffOut time.Duration `toml:"handoff_out"`
	// HandoffIn is the node CPU to take a handed-off connection (instead of
	// ConnSetup).
	HandoffIn time.Duration `toml:"handoff_in"`
	// PeerPer512 is the node CPU, on each side, to move 512 bytes between two
	// nodes' memories (weblins' cooperative fetch).
	PeerPer512 time.Duration `toml:"peer_per_512"`
	// Delivery is the time from a node's last CPU job on a request to the
	// client holding the whole response: the network between them, a
	// relaying front's copy, the client reading it. The request still
	// counts in its node's Node.Active meanwhile, as a live front counts a
	// request from its dispatch to the end of the response, but no CPU or
	// disk is busy (every request has its own). Default 0: the seeds'
	// model (seed 000 §3.3, Pai et al. 1998), in which a node's CPU time is
	// a response's whole life. With clients far away, or a front that
	// costs more than the nodes, it dominates, and a load-aware policy then
	// sees loads that follow the request rates more than the nodes' costs.
	Delivery time.Duration `toml:"delivery"`
	// NoCacheAbove: objects larger than this many bytes are never cached and
	// always read from disk (seed 000 §3.3.1: 500 KB). 0 (the default) is
	// what live nodes admit: an eighth of the node's cache, at least 500 KB
	// (store.DefaultMaxObjectShare), so large files are cached too.
	NoCacheAbove int64 `toml:"no_cache_above"`

	// Ttransfer is the front CPU to forward one packet.
	Ttransfer time.Duration `toml:"t_transfer"`
	// Tconn is the front CPU to accept a client connection (l7 front).
	Tconn time.Duration `toml:"t_conn"`
	// Thandoff is the front CPU to hand a connection to a node (l7 front).
	Thandoff time.Duration `toml:"t_handoff"`
	// Tdispatch is the front CPU of a content-aware decision.
	Tdispatch time.Duration `toml:"t_dispatch"`
	// L4Dispatch is the front CPU of a layer-4 (content-blind) decision.
	L4Dispatch time.Duration `toml:"l4_dispatch"`

	// QueryBytes and ReplyBytes are one location query and its reply between
	// a node and a dispatcher (SCARD; seed 000 §3.2).
	QueryBytes int64 `toml:"query_bytes"`
	ReplyBytes int64 `toml:"reply_bytes"`
	// TagBytes is TB-CCRD's tag and TagPackets the client packets carrying it.
	TagBytes   int64 `toml:"tag_bytes"`
	TagPackets int64 `toml:"tag_packets"`
}

// DefaultCosts returns the documented defaults (see Costs).
func DefaultCosts() Costs {
	return Costs{
		ConnSetup:       145 * time.Microsecond,
		ConnTeardown:    145 * time.Microsecond,
		TransmitPer512:  40 * time.Microsecond,
		DiskLatency:     28 * time.Millisecond,
		DiskPer4K:       410 * time.Microsecond,
		DiskPerExtra44K: 14 * time.Millisecond,
		HandoffOut:      120 * time.Microsecond,
		HandoffIn:       145 * time.Microsecond,
		PeerPer512:      40 * time.Microsecond,
		NoCacheAbove:    0,
		Ttransfer:       8 * time.Microsecond,
		Tconn:           120 * time.Microsecond,
		Thandoff:        120 * time.Microsecond,
		Tdispatch:       18 * time.Microsecond,
		L4Dispatch:      8 * time.Microsecond,
		QueryBytes:      84,
		ReplyBytes:      72,
		TagBytes:        6,
		TagPackets:      6,
	}
}

// LoadCosts reads a TOML file whose keys are Costs' toml names (durations as
// strings like "145us" or integers in nanoseconds) and applies them on top of
// base. Unknown keys are an error, so a typo does not silently keep a default.
func LoadCosts(path string, base Costs) (Costs, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return base, fmt.Errorf("costs: %w", err)
	}
	c := base
	md, err := toml.Decode(string(b), &c)
	if err != nil {
		return base, fmt.Errorf("costs %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return base, fmt.Errorf("costs %s: unknown key %q", path, und[0].String())
	}
	if err := c.Validate(); err != nil {
		return base, fmt.Errorf("costs %s: %w", path, err)
	}
	return c, nil
}

// Validate rejects negative costs.
func (c *Costs) Validate() error {
	var errs []error
	for _, f := range c.Fields() {
		if f.Dur != nil && *f.Dur < 0 {
			errs = append(errs, fmt.Errorf("%s %v: must not be negative", f.Name, *f.Dur))
		}
		if f.Int != nil && *f.Int < 0 {
			errs = append(errs, fmt.Errorf("%s %d: must not be negative", f.Name, *f.Int))
		}
	}
	return errors.Join(errs...)
}

// CostField is one settable field of Costs, exactly one of Dur and Int set.
type CostField struct {
	// Name is the TOML key (and the CLI flag suffix).
	Name  string
	Usage string
	Dur   *time.Duration
	Int   *int64
}

// Fields lists c's fields by TOML name with pointers into c, so a CLI can bind
// a flag to each without reflection.
func (c *Costs) Fields() []CostField {
	d := func(name, usage string, p *time.Duration) CostField {
		return CostField{Name: name, Usage: usage, Dur: p}
	}
	i := func(name, usage string, p *int64) CostField { return CostField{Name: name, Usage: usage, Int: p} }
	return []CostField{
		d("conn_setup", "node CPU per connection setup", &c.ConnSetup),
		d("conn_teardown", "node CPU per connection teardown", &c.ConnTeardown),
		d("transmit_per_512", "node CPU per 512 B sent", &c.TransmitPer512),
		d("disk_latency", "disk seek+rotation per read", &c.DiskLatency),
		d("disk_per_4k", "disk transfer per 4 KiB", &c.DiskPer4K),
		d("disk_per_extra_44k", "extra disk seek per 44 KiB above 44 KiB", &c.DiskPerExtra44K),
		d("handoff_out", "node CPU to hand a connection off", &c.HandoffOut),
		d("handoff_in", "node CPU to take a handed-off connection", &c.HandoffIn),
		d("peer_per_512", "node CPU per 512 B of peer-memory fetch, each side", &c.PeerPer512),
		d("delivery", "time from a node's last CPU job to the client holding the response; the request stays in the node's load", &c.Delivery),
		i("no_cache_above", "objects above this many bytes always go to disk", &c.NoCacheAbove),
		d("t_transfer", "front CPU per forwarded packet", &c.Ttransfer),
		d("t_conn", "front CPU per accepted connection (l7)", &c.Tconn),
		d("t_handoff", "front CPU per handoff (l7)", &c.Thandoff),
		d("t_dispatch", "front CPU per content-aware decision", &c.Tdispatch),
		d("l4_dispatch", "front CPU per layer-4 decision", &c.L4Dispatch),
		i("query_bytes", "internal bytes of a location query", &c.QueryBytes),
		i("reply_bytes", "internal bytes of a location reply", &c.ReplyBytes),
		i("tag_bytes", "internal bytes of a TB-CCRD tag", &c.TagBytes),
		i("tag_packets", "client packets carrying a tag", &c.TagPackets),
	}
}

// ceilDiv is ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// Transmit is the node CPU to send size bytes.
func (c *Costs) Transmit(size int64) time.Duration {
	return time.Duration(ceilDiv(max(size, 0), 512)) * c.TransmitPer512
}

// Peer is the node CPU, on each side, to move size bytes between nodes.
func (c *Costs) Peer(size int64) time.Duration {
	return time.Duration(ceilDiv(max(size, 0), 512)) * c.PeerPer512
}

// Disk is the time of one disk read of size bytes (Pai et al. 1998).
func (c *Costs) Disk(size int64) time.Duration {
	size = max(size, 0)
	d := c.DiskLatency + time.Duration(ceilDiv(size, 4<<10))*c.DiskPer4K
	if size > 44<<10 {
		d += time.Duration(ceilDiv(size-44<<10, 44<<10)) * c.DiskPerExtra44K
	}
	return d
}

// Front is the front CPU per request on path p (seed 000 §3.1).
func (c *Costs) Front(p Path) time.Duration {
	switch p {
	case PathL7:
		return c.Tconn + c.Thandoff + c.Tdispatch + c.Ttransfer
	case PathTag:
		return 4*c.Ttransfer + c.Tdispatch
	default:
		return 4*c.Ttransfer + c.L4Dispatch
	}
}

// Path is the front's data path, which sets its CPU cost per request.
type Path string

const (
	// PathL4 is a layer-4 switch: it forwards the client's packets to the node
	// a content-blind choice picked (wrr, lc, …; weblins' first member).
	PathL4 Path = "l4"
	// PathL7 is a content-aware front that accepts the connection, reads the
	// request and hands it off to (or relays it to) the chosen node: LARD's
	// front, cost T1.
	PathL7 Path = "l7"
	// PathTag is TB-CCRD's front: it forwards packets and tags the URL
	// request; the nodes set up and hand off connections themselves (T2).
	PathTag Path = "tag"
)

// ParsePath accepts "auto" (""), "l4", "l7" (alias "relay"), "tag".
func ParsePath(s string) (Path, error) {
	switch s {
	case "", "auto":
		return "", nil
	case "l4":
		return PathL4, nil
	case "l7", "relay":
		return PathL7, nil
	case "tag":
		return PathTag, nil
	}
	return "", fmt.Errorf("front path %q: want auto, l4, l7 (relay) or tag", s)
}

// DefaultPath is the data path a policy runs on when none is given: the
// front its traits declare (tbccrd on its tag front; the content-aware
// front-end policies lard, lardr, urlhash and chbl on an l7 front; weblins,
// whose content-aware part runs on the nodes, and every content-blind policy
// behind a layer-4 switch).
func DefaultPath(t policy.Traits) Path {
	switch t.Front {
	case policy.FrontTag:
		return PathTag
	case policy.FrontL7:
		return PathL7
	}
	return PathL4
}

// Scaled returns c with every time cost multiplied by f (> 0), byte costs
// unchanged: the same cluster on hardware f times slower (f < 1: faster).
// In throughput mode every event time scales by f, so a run's counts stay
// those of c except where a policy acts on a period of real time (dfwrr's
// load feedback and weblins' popular-set rebuild every Period, LARD/R's K,
// the nodes' cache digests): those see f⁻¹ times as many periods. A
// prediction of a live cluster therefore needs costs at that cluster's
// speed, and Scaled by the ratio of its measured elapsed time to the
// simulated one gives them (docs/parity.md).
func (c Costs) Scaled(f float64) Costs {
	for _, fd := range c.Fields() {
		if fd.Dur != nil {
			*fd.Dur = time.Duration(math.Round(float64(*fd.Dur) * f))
		}
	}
	return c
}
