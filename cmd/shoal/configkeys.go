package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"shoal/internal/config"
)

// Every flag of `shoal front` and `shoal node` has a key in their TOML
// configuration files (internal/config); these tables name it, and
// TestEveryFlagHasAKey checks them against the flags and the files' keys
// (none missing). The values of a file apply unless the flag is given on the
// command line.

// metaFlags are about the command line itself, not configuration.
var metaFlags = map[string]bool{"config": true, "print-config": true}

// frontFlagKeys maps each `shoal front` flag to its key.
var frontFlagKeys = map[string]string{
	"listen":                 "listen",
	"nodes":                  "node.url",
	"policy":                 "policy",
	"path":                   "path",
	"admin":                  "admin",
	"admin-token-file":       "admin_token_file",
	"max-conn":               "limits.max_conn_per_node",
	"queue-timeout":          "limits.queue_timeout",
	"header-timeout":         "limits.header_timeout",
	"idle-timeout":           "limits.idle_timeout",
	"max-header-bytes":       "limits.max_header_bytes",
	"health-interval":        "health.interval",
	"sysmon-idle":            "sysmon_idle",
	"handoff-dir":            "handoff_dir",
	"handoff-uid":            "handoff_uid",
	"passfd-moves":           "passfd_moves",
	"max-conns":              "limits.max_conns",
	"max-conns-per-ip":       "limits.max_conns_per_ip",
	"send-timeout":           "limits.send_timeout",
	"hybrid-cpu":             "hybrid.cpu_percent",
	"hybrid-conns":           "hybrid.conns",
	"hybrid-size-kb":         "hybrid.size_kb",
	"site":                   "hybrid.site",
	"repair-key-file":        "repair.key_file",
	"repair-port":            "repair.port",
	"repair-dev":             "repair.dev",
	"repair-steer":           "repair.steer",
	"repair-moves":           "repair.moves",
	"repair-accept":          "repair.accept",
	"access-log":             "access_log",
	"access-log-format":      "access_log_format",
	"log-level":              "log_level",
	"log-format":             "log_format",
	"shutdown-timeout":       "shutdown_timeout",
	"publish-dir":            "publish_dir",
	"publish-fetch-url":      "publish_fetch_url",
	"replicas":               "replicas",
	"tls-cert":               "tls.cert",
	"tls-key":                "tls.key",
	"vhosts":                 "vhosts",
	"http2":                  "protocols.http2",
	"h2c":                    "protocols.h2c",
	"http3":                  "protocols.http3",
	"proxy-protocol-from":    "protocols.proxy_protocol_from",
	"max-concurrent-streams": "protocols.max_concurrent_streams",
}

// nodeFlagKeys maps each `shoal node` flag to its key.
var nodeFlagKeys = map[string]string{
	"root":             "root",
	"listen":           "listen",
	"cache-mb":         "cache_mb",
	"memory":           "memory",
	"cache":            "cache",
	"max-object-kb":    "max_object_kb",
	"read-timeout":     "read_timeout",
	"idle-timeout":     "idle_timeout",
	"max-conns":        "max_conns",
	"send-timeout":     "send_timeout",
	"access-log":       "access_log",
	"handoff-socket":   "handoff_socket",
	"trusted-fronts":   "trusted_fronts",
	"log-health":       "log_health",
	"log-level":        "log_level",
	"log-format":       "log_format",
	"shutdown-timeout": "shutdown_timeout",
	"publish-dir":      "publish_dir",
	"admin-token-file": "admin_token_file",
	"watch":            "watch",
	"sysmon-idle":      "sysmon_idle",
	"max-ranges":       "max_ranges",
	"no-precompressed": "no_precompressed",
	"vhosts":           "vhosts",
	"alias":            "aliases",
	"origin":           "origin",
	"data":             "data",
	"disk-mb":          "disk_mb",
	"repair-key-file":  "repair.key_file",
	"repair-listen":    "repair.listen",
	"repair-max-conns": "repair.max_conns",
	"peer-key-file":    "peer.key_file",
	"peers":            "peer.peers",
	"digest-period":    "peer.digest_period",
}

// frontFileFlags gives the flag values of the front file's [hybrid] and
// [repair] tables (the other keys are copied by runFront itself).
func frontFileFlags(f config.Front) map[string]string {
	return map[string]string{
		"hybrid-cpu":      strconv.FormatFloat(f.Hybrid.CPUPercent, 'g', -1, 64),
		"hybrid-conns":    strconv.FormatInt(f.Hybrid.Conns, 10),
		"hybrid-size-kb":  strconv.FormatInt(f.Hybrid.SizeKB, 10),
		"site":            f.Hybrid.Site,
		"repair-key-file": f.Repair.KeyFile,
		"repair-port":     strconv.Itoa(f.Repair.Port),
		"repair-dev":      f.Repair.Dev,
		"repair-steer":    f.Repair.Steer,
		"repair-moves":    f.Repair.Moves,
		"repair-accept":   f.Repair.Accept,
	}
}

// nodeFileFlags gives the flag values of a node file.
func nodeFileFlags(n config.NodeServer) map[string]string {
	return map[string]string{
		"root":             n.Root,
		"listen":           n.Listen,
		"cache-mb":         strconv.FormatInt(n.CacheMB, 10),
		"memory":           n.Memory,
		"cache":            n.Cache,
		"max-object-kb":    strconv.FormatInt(n.MaxObjectKB, 10),
		"read-timeout":     n.ReadTimeout.String(),
		"idle-timeout":     n.IdleTimeout.String(),
		"max-conns":        strconv.Itoa(n.MaxConns),
		"send-timeout":     n.SendTimeout.String(),
		"access-log":       n.AccessLog,
		"handoff-socket":   n.HandoffSocket,
		"trusted-fronts":   strings.Join(n.TrustedFronts, ","),
		"log-health":       strconv.FormatBool(n.LogHealth),
		"log-level":        n.LogLevel,
		"log-format":       n.LogFormat,
		"shutdown-timeout": n.ShutdownTimeout.String(),
		"publish-dir":      n.PublishDir,
		"admin-token-file": n.AdminTokenFile,
		"watch":            strconv.FormatBool(n.Watch),
		"sysmon-idle":      strconv.FormatBool(n.SysmonIdle),
		"max-ranges":       strconv.Itoa(n.MaxRanges),
		"no-precompressed": strconv.FormatBool(n.NoPrecompressed),
		"vhosts":           strconv.FormatBool(n.VHosts),
		"data":             n.Data,
		"disk-mb":          strconv.FormatInt(n.DiskMB, 10),
		"repair-key-file":  n.Repair.KeyFile,
		"repair-listen":    n.Repair.Listen,
		"repair-max-conns": strconv.Itoa(n.Repair.MaxConns),
		"peer-key-file":    n.Peer.KeyFile,
		"peers":            strings.Join(n.Peer.Peers, ","),
		"digest-period":    n.Peer.DigestPeriod.String(),
	}
}

// applyFile sets every flag in vals that was not given on the command line.
func applyFile(fs *flag.FlagSet, vals map[string]string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, v := range vals {
		if set[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("config: %s: %w", name, err)
		}
	}
	return nil
}
