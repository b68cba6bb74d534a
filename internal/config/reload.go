package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Reload is what changed between the running front's configuration and the
// file read again on SIGHUP, sorted into what the front applies at run time.
type Reload struct {
	// Policy: the policy or its tuning changed; a new policy takes over
	// (with empty tables) without dropping a connection.
	Policy bool
	// Add, Remove and Weight change the node set: nodes to add (by URL),
	// URLs to remove, and new weights of nodes kept.
	Add    []Node
	Remove []string
	Weight map[string]int
	// Health: the health-check interval, rise or fall changed.
	Health bool
	// Limits: a key of [limits] changed; the front moves its listener to a
	// new data plane with the new limits, and the old one finishes the
	// requests in flight (as nginx's reload does).
	Limits bool
	// LogLevel: log_level changed.
	LogLevel bool
	// ShutdownTimeout: shutdown_timeout changed (read at the next stop).
	ShutdownTimeout bool
}

// Empty reports whether nothing is to change.
func (r Reload) Empty() bool {
	return !r.Policy && len(r.Add) == 0 && len(r.Remove) == 0 && len(r.Weight) == 0 && !r.Health && !r.Limits &&
		!r.LogLevel && !r.ShutdownTimeout
}

// String lists what changes, for the log.
func (r Reload) String() string {
	var parts []string
	if r.Policy {
		parts = append(parts, "policy")
	}
	if len(r.Add) > 0 {
		parts = append(parts, fmt.Sprintf("%d nodes added", len(r.Add)))
	}
	if len(r.Remove) > 0 {
		parts = append(parts, fmt.Sprintf("%d nodes removed", len(r.Remove)))
	}
	if len(r.Weight) > 0 {
		parts = append(parts, fmt.Sprintf("%d weights", len(r.Weight)))
	}
	for _, x := range []struct {
		on   bool
		name string
	}{{r.Health, "health"}, {r.Limits, "limits"}, {r.LogLevel, "log_level"}, {r.ShutdownTimeout, "shutdown_timeout"}} {
		if x.on {
			parts = append(parts, x.name)
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// ErrRestartNeeded is wrapped by PlanReload's refusals.
var ErrRestartNeeded = errors.New("cannot change while the front runs; restart it to apply, or put the old value back")

// PlanReload compares the running configuration with the new one. Keys that
// only a restart can change (addresses the front listens on, the data path,
// the protocols, the admin token, the log's format and file) are refused,
// each named; then
// nothing is applied, so a reload is all or nothing.
func PlanReload(old, new Front) (Reload, error) {
	var errs []error
	fixed := func(key string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			errs = append(errs, fmt.Errorf("%s: %v -> %v: %w", key, a, b, ErrRestartNeeded))
		}
	}
	fixed("listen", old.Listen, new.Listen)
	fixed("admin", old.Admin, new.Admin)
	fixed("admin_token_file", old.AdminTokenFile, new.AdminTokenFile)
	fixed("path", old.Path, new.Path)
	fixed("access_log", old.AccessLog, new.AccessLog)
	fixed("access_log_format", old.AccessLogFormat, new.AccessLogFormat)
	fixed("log_format", old.LogFormat, new.LogFormat)
	fixed("sysmon_idle", *old.SysmonIdle, *new.SysmonIdle)
	fixed("handoff_dir", old.HandoffDir, new.HandoffDir)
	fixed("handoff_uid", *old.HandoffUID, *new.HandoffUID)
	fixed("passfd_moves", old.PassFDMoves, new.PassFDMoves)
	fixed("publish_dir", old.PublishDir, new.PublishDir)
	fixed("publish_fetch_url", old.PublishFetchURL, new.PublishFetchURL)
	fixed("protocols", old.Protocols, new.Protocols) // ALPN, the UDP socket and PROXY sources are set up at start
	if old.Limits != new.Limits && old.Path != "relay" && old.Path != "redirect" {
		errs = append(errs, fmt.Errorf("limits with path %s: %w (a new data plane is built only for relay and redirect)", old.Path, ErrRestartNeeded))
	}
	var r Reload
	r.Policy = old.Policy != new.Policy || !reflect.DeepEqual(old.Tuning, new.Tuning)
	r.Health = old.Health != new.Health
	r.Limits = old.Limits != new.Limits
	r.LogLevel = old.LogLevel != new.LogLevel
	r.ShutdownTimeout = old.ShutdownTimeout != new.ShutdownTimeout

	was := map[string]Node{}
	for _, n := range old.Nodes {
		was[n.URL] = n
	}
	is := map[string]bool{}
	for _, n := range new.Nodes {
		is[n.URL] = true
		o, ok := was[n.URL]
		if !ok {
			r.Add = append(r.Add, n)
			continue
		}
		if o.Group != n.Group {
			errs = append(errs, fmt.Errorf("node %s: group %q -> %q: %w (remove the node, reload, then add it back)", n.URL, o.Group, n.Group, ErrRestartNeeded))
		}
		if w, ow := weightOf(n), weightOf(o); w != ow {
			if r.Weight == nil {
				r.Weight = map[string]int{}
			}
			r.Weight[n.URL] = w
		}
	}
	for _, n := range old.Nodes {
		if !is[n.URL] {
			r.Remove = append(r.Remove, n.URL)
		}
	}
	if len(new.Nodes) == 0 {
		errs = append(errs, errors.New("no [[node]] left: a front needs at least one node"))
	}
	if err := errors.Join(errs...); err != nil {
		return Reload{}, err
	}
	return r, nil
}

func weightOf(n Node) int {
	if n.Weight == nil {
		return 1
	}
	return *n.Weight
}
