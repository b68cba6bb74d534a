package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/BurntSushi/toml"

	"shoal/internal/cluster/front"
)

// Pop is the configuration file of `shoal pop` (SPEC §5). Its
// defaults are not here: the command fills a Pop from pop.DefaultConfig and
// the file overrides what it sets, so flags, file and --print-config read
// one defaults struct.
type Pop struct {
	// Name identifies the PoP; its ring ID is the SHA-256 of the name.
	Name string `toml:"name"`
	// Peer is the address other PoPs connect to.
	Peer string `toml:"peer"`
	// Join lists peer addresses of PoPs already in the DCDN; empty founds one.
	Join []string `toml:"join"`
	// SeedFile holds the shared authentication seed (≥ 16 bytes).
	SeedFile string `toml:"seed_file"`
	// JoinTimeout bounds the wait for the join's ping cycle.
	JoinTimeout Duration `toml:"join_timeout"`
	// Listen is the gateway (front) address; Admin the admin API with
	// /pops, /chord and /metrics ("off" disables it).
	Listen string `toml:"listen"`
	Admin  string `toml:"admin"`
	// GatewayIPs are the addresses clients reach the gateway at, which
	// every PoP's DNS answers for this PoP (empty: listen's IP when
	// specific, else peer's).
	GatewayIPs []string `toml:"gateway_ips"`
	// Nodes is the number of in-process nodes; CacheMB each one's cache
	// (0: the process's memory cgroup limit split between them, else 64).
	Nodes   int `toml:"nodes"`
	CacheMB int `toml:"cache_mb"`
	// TLS serves the gateway over HTTPS with a self-signed certificate
	// kept in the data folder, as `shoal up --tls` does.
	TLS bool `toml:"tls"`
	// Protocols are the gateway's [protocols], as a front's (HTTP/2, h2c,
	// HTTP/3, PROXY protocol sources, stream limit).
	Protocols Protocols `toml:"protocols"`
	// MBPP holds the ring protocol's constants (seed 003 §2).
	MBPP PopMBPP `toml:"mbpp"`
	// Chord holds the Chord periods.
	Chord PopChord `toml:"chord"`
	// DNS is the authoritative DNS responder (off without addr).
	DNS PopDNS `toml:"dns"`
	// Content is the content tier (off without edge).
	Content PopContent `toml:"content"`
}

// PopContent is [content]: see internal/cdn/replica.Config. Edge is the content
// HTTP address; Origin the origin URL ("" = the PoP's own gateway). Without
// Edge, Origin and Origins make the PoP's nodes HTTP caches in front of
// the origin (cache mode): Origin answers every host, Origins maps a host
// name to its own origin ("example.com" = "http://10.0.0.1:8080").
type PopContent struct {
	Edge        string            `toml:"edge"`
	Origin      string            `toml:"origin"`
	Origins     map[string]string `toml:"origins"`
	Window      Duration          `toml:"window"`
	MinRequests int               `toml:"min_requests"`
	HotTop      int               `toml:"hot_top"`
	HotMin      int               `toml:"hot_min"`
	DirTTL      Duration          `toml:"dir_ttl"`
	Redirect    bool              `toml:"redirect"`
	// ShieldStretch and NearerOrigin are the miss plan's rules
	// (replica.Config).
	ShieldStretch float64 `toml:"shield_stretch"`
	NearerOrigin  bool    `toml:"nearer_origin"`
}

// PopDNS is [dns]: see internal/cdn/cdndns.Config. Coverage is the file of
// address prefixes → PoP names (CSV "prefix,pop" or JSON); the SOA's
// timers are in seconds, as in a zone file.
type PopDNS struct {
	Addr       string   `toml:"addr"`
	Zone       string   `toml:"zone"`
	Coverage   string   `toml:"coverage"`
	Names      []string `toml:"names"`
	NS         []string `toml:"ns"`
	Hostmaster string   `toml:"hostmaster"`
	Serial     uint32   `toml:"serial"`
	Refresh    uint32   `toml:"refresh"`
	Retry      uint32   `toml:"retry"`
	Expire     uint32   `toml:"expire"`
	NegTTL     uint32   `toml:"negative_ttl"`
	ZoneTTL    uint32   `toml:"zone_ttl"`
	TTL        int      `toml:"ttl"`
	MinServer  float64  `toml:"min_server"`
	MaxUDP     int      `toml:"max_udp"`
}

// PopMBPP is [mbpp]: see internal/cdn/mbpp.Config for each constant.
type PopMBPP struct {
	Hold           Duration `toml:"hold"`
	AckTimeout     Duration `toml:"ack_timeout"`
	Retries        int      `toml:"retries"`
	LearningFactor float64  `toml:"learning_factor"`
	WeightLink     float64  `toml:"weight_link"`
	WeightServer   float64  `toml:"weight_server"`
	LocalBonus     float64  `toml:"local_bonus"`
	RTTRef         Duration `toml:"rtt_ref"`
	RTTDeadband    float64  `toml:"rtt_deadband"`
	ServerDeadband float64  `toml:"server_deadband"`
	PublishLinks   int      `toml:"publish_links"`
	WatchdogRounds int      `toml:"watchdog_rounds"`
	EstimateRTT    bool     `toml:"estimate_rtt"`
	HealEvery      Duration `toml:"heal_every"`
}

// PopChord is [chord]: see internal/cdn/chord.Config.
type PopChord struct {
	Successors       int      `toml:"successors"`
	Stabilise        Duration `toml:"stabilise"`
	FixFingers       Duration `toml:"fix_fingers"`
	CheckPredecessor Duration `toml:"check_predecessor"`
}

// LoadPop reads a pop file over base (the defaults) and validates it.
func LoadPop(path string, base Pop) (Pop, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return base, fmt.Errorf("config: %w", err)
	}
	return ParsePop(path, data, base)
}

// ParsePop is LoadPop over bytes already read.
func ParsePop(name string, data []byte, base Pop) (Pop, error) {
	p := base
	md, err := toml.Decode(string(data), &p)
	if err != nil {
		var pe toml.ParseError
		line := 0
		if errors.As(err, &pe) {
			line = pe.Position.Line
		}
		return base, &Error{File: name, Line: line, Msg: err.Error(),
			Fix: "check the TOML syntax and the value's type (strings in quotes, durations like \"1s\")"}
	}
	var errs []error
	for _, k := range md.Undecoded() {
		errs = append(errs, &Error{File: name, Line: lineOf(data, k), Msg: fmt.Sprintf("unknown key %q", k.String()),
			Fix: "remove it or correct its spelling (shoal pop --print-config shows every key)"})
	}
	errs = append(errs, p.validate(name, data)...)
	return p, errors.Join(errs...)
}

// Validate checks a configuration built from flags.
func (p *Pop) Validate() error { return errors.Join(p.validate("flags", nil)...) }

func (p *Pop) validate(name string, data []byte) []error {
	var errs []error
	bad := func(key []string, msg, fix string) {
		errs = append(errs, &Error{File: name, Line: lineOf(data, toml.Key(key)), Msg: msg, Fix: fix})
	}
	if p.Name == "" {
		bad([]string{"name"}, "the PoP has no name", "set name = \"paris\" (or --name)")
	}
	if p.SeedFile == "" {
		bad([]string{"seed_file"}, "no seed file", "create one with (umask 077; head -c 32 /dev/urandom > seed) and set seed_file (or --seed-file)")
	}
	if p.Nodes < 1 || p.Nodes > 64 {
		bad([]string{"nodes"}, fmt.Sprintf("nodes = %d", p.Nodes), "use 1 to 64")
	}
	if p.CacheMB < 0 {
		bad([]string{"cache_mb"}, fmt.Sprintf("cache_mb = %d", p.CacheMB), "use a size in MiB (0: from the memory cgroup's limit)")
	}
	if _, err := front.ParsePrefixes(p.Protocols.ProxyProtocolFrom); err != nil {
		bad([]string{"protocols", "proxy_protocol_from"}, "proxy_protocol_from: "+err.Error(), "list addresses or networks such as \"10.0.0.0/8\"")
	}
	if p.Protocols.HTTP3 && !p.TLS {
		bad([]string{"protocols", "http3"}, "http3 needs TLS", "set tls = true (or --tls): QUIC carries TLS 1.3 itself")
	}
	if d := p.DNS; d.Addr != "" {
		if d.Zone == "" {
			bad([]string{"dns", "zone"}, "dns.addr is set but no zone", "set zone = \"cdn.example.\" (or --zone)")
		}
		if d.TTL < 1 || d.TTL > 86400 {
			bad([]string{"dns", "ttl"}, fmt.Sprintf("dns.ttl = %d", d.TTL), "use 1 to 86400 seconds (short: 20)")
		}
		if d.MinServer < 0 || d.MinServer >= 1 {
			bad([]string{"dns", "min_server"}, fmt.Sprintf("dns.min_server = %v", d.MinServer), "use a value in [0,1), e.g. 0.05")
		}
		if d.MaxUDP < 512 || d.MaxUDP > 65535 {
			bad([]string{"dns", "max_udp"}, fmt.Sprintf("dns.max_udp = %d", d.MaxUDP), "use 512 to 65535 bytes (1232 avoids fragmentation)")
		}
		if d.Refresh == 0 || d.Retry == 0 || d.Expire < d.Refresh || d.ZoneTTL == 0 {
			bad([]string{"dns", "refresh"}, "dns.refresh, retry and zone_ttl must be > 0 and expire ≥ refresh", "use refresh = 3600, retry = 600, expire = 1209600, zone_ttl = 3600")
		}
		if len(d.Names) == 0 {
			bad([]string{"dns", "names"}, "dns.names is empty: no name would answer a PoP", "use names = [\"@\", \"www\"] (\"*\" for every name)")
		}
	}
	if p.Content.ShieldStretch < 0 {
		bad([]string{"content", "shield_stretch"}, fmt.Sprintf("content.shield_stretch = %v", p.Content.ShieldStretch), "use 0 (always through the home) or a bound such as 1.5")
	}
	if c := p.Content; c.Edge != "" {
		if c.Window.Duration <= 0 || c.DirTTL.Duration < c.Window.Duration {
			bad([]string{"content", "window"}, "content.window must be > 0 and dir_ttl ≥ window", "use window = \"1h\", dir_ttl = \"2h\"")
		}
		if c.MinRequests < 0 || c.HotTop < 0 || c.HotMin < 0 {
			bad([]string{"content", "min_requests"}, "min_requests, hot_top and hot_min must be ≥ 0", "use 1, 10 and 5")
		}
		if c.Origin != "" && !strings.HasPrefix(c.Origin, "http://") && !strings.HasPrefix(c.Origin, "https://") {
			bad([]string{"content", "origin"}, fmt.Sprintf("content.origin %q is not an http(s) URL", c.Origin), "use origin = \"http://origin.example:8080\" or leave it empty for the PoP's own site")
		}
	}
	for host, u := range p.Content.Origins {
		if host == "" || strings.Contains(host, "/") || (!strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://")) {
			bad([]string{"content", "origins"}, fmt.Sprintf("content.origins %q = %q: want a host name and an http(s) URL", host, u),
				"use \"example.com\" = \"http://origin.example:8080\"")
		}
	}
	if c := p.Content; c.Edge == "" && c.Origin != "" && !strings.HasPrefix(c.Origin, "http://") && !strings.HasPrefix(c.Origin, "https://") {
		bad([]string{"content", "origin"}, fmt.Sprintf("content.origin %q is not an http(s) URL", c.Origin), "use origin = \"http://origin.example:8080\"")
	}
	m := p.MBPP
	if m.Hold.Duration <= 0 || m.AckTimeout.Duration <= 0 || m.RTTRef.Duration <= 0 {
		bad([]string{"mbpp", "hold"}, "hold, ack_timeout and rtt_ref must be > 0", "use durations such as \"100ms\"")
	}
	if m.LearningFactor <= 0 || m.LearningFactor > 1 {
		bad([]string{"mbpp", "learning_factor"}, fmt.Sprintf("learning_factor %v is outside (0,1]", m.LearningFactor), "use 0.125")
	}
	if m.WeightLink < 0 || m.WeightServer < 0 || m.WeightLink+m.WeightServer == 0 {
		bad([]string{"mbpp", "weight_link"}, "weights must be ≥ 0 and not both 0", "use weight_link = 1, weight_server = 3 (seed 003)")
	}
	if m.RTTDeadband < 0 || m.ServerDeadband < 0 {
		bad([]string{"mbpp", "rtt_deadband"}, "rtt_deadband and server_deadband must be ≥ 0", "use rtt_deadband = 0.05, server_deadband = 0.02")
	}
	if m.PublishLinks < 0 {
		bad([]string{"mbpp", "publish_links"}, fmt.Sprintf("publish_links = %d", m.PublishLinks), "use 16, or 0 to publish every link")
	}
	if m.WatchdogRounds < 1 {
		bad([]string{"mbpp", "watchdog_rounds"}, fmt.Sprintf("watchdog_rounds = %d", m.WatchdogRounds), "use 3")
	}
	if m.HealEvery.Duration < 0 {
		bad([]string{"mbpp", "heal_every"}, fmt.Sprintf("heal_every = %v", m.HealEvery.Duration), "use \"2s\", or 0 to leave a split ring split")
	}
	if p.Chord.Successors < 3 {
		bad([]string{"chord", "successors"}, fmt.Sprintf("successors = %d", p.Chord.Successors), "use 3 or more")
	}
	if p.Chord.Stabilise.Duration <= 0 || p.Chord.FixFingers.Duration <= 0 || p.Chord.CheckPredecessor.Duration <= 0 {
		bad([]string{"chord", "stabilise"}, "chord periods must be > 0", "use durations such as \"500ms\"")
	}
	return errs
}

// PopTemplate renders p as a commented file (shoal pop --print-config).
func PopTemplate(p Pop) string {
	var b bytes.Buffer
	b.WriteString("# shoal pop configuration (every key shown with its default).\n")
	b.WriteString("# A PoP of the CDN tier: gateway + nodes + MBPP + Chord (SPEC §5).\n")
	toml.NewEncoder(&b).Encode(p)
	return b.String()
}
