package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/policy"
	"shoal/internal/config"
	"shoal/internal/gateway"
)

// frontRuntime is what `shoal front` changes on SIGHUP (docs/admin.md,
// "Reload"): the policy, the nodes and their weights, health checks, the
// log level and, on relay and redirect, the limits, which take a new data
// plane on the same listening socket while the old one finishes its
// requests. Everything else needs a restart and makes the reload refuse.
type frontRuntime struct {
	cfgFile string
	// override applies the flags given on the command line, which win
	// over the file at each reload as at start.
	override func(*config.Front)
	fc       config.Front
	gw       *gateway.Gateway
	level    *slog.LevelVar
	log      *slog.Logger
	access   *front.AccessLog
	certs    *front.Certs
	// adminAddr, adminToken and adminPublic describe the admin API for
	// the start-up log line.
	adminAddr   string
	adminToken  string
	adminPublic bool
	// closers release what start-up opened, in reverse.
	closers []func()
}

// reload reads the configuration file again and applies it, all or
// nothing; the access log is reopened either way, as SIGHUP always has
// (SIGUSR1 reopens it alone).
func (rt *frontRuntime) reload() error {
	rt.reopenLogs("SIGHUP")
	if rt.cfgFile == "" {
		return errors.New("started without --config: no configuration to reload")
	}
	nfc, err := config.LoadFront(rt.cfgFile)
	if err != nil {
		return err
	}
	rt.override(&nfc)
	plan, err := config.PlanReload(rt.fc, nfc)
	if err != nil {
		return err
	}
	var newPol policy.Policy
	if plan.Policy {
		if newPol, err = policy.New(nfc.Policy, nfc.Tuning.Config()); err != nil {
			return err
		}
	}
	var lv slog.Level
	if plan.LogLevel {
		if lv, err = parseLevel(nfc.LogLevel); err != nil {
			return err
		}
	}
	var nsrv *front.Server
	var nln net.Listener
	if plan.Limits {
		if nsrv, err = rt.gw.NewServer(nfc); err != nil {
			return err
		}
		if nln, err = dupListener(rt.gw.Listener()); err != nil {
			return err
		}
	}
	// From here on nothing can fail but a node change the file's
	// validation did not foresee; those are logged, the rest applies.
	if newPol != nil {
		rt.gw.SetPolicy(newPol) // under the cluster's lock
	}
	cl := rt.gw.Control
	byURL := map[string]*control.Backend{}
	for _, b := range cl.Backends() {
		byURL[b.URL] = b
	}
	var errs []error
	for _, u := range plan.Remove {
		if b := byURL[u]; b != nil {
			errs = append(errs, cl.Remove(b.Index))
		}
	}
	for u, w := range plan.Weight {
		if b := byURL[u]; b != nil {
			errs = append(errs, cl.SetWeight(b.Index, w))
		}
	}
	for _, n := range plan.Add {
		spec := control.NodeSpec{URL: n.URL, Group: n.Group}
		if n.Weight != nil {
			spec.Weight = *n.Weight
		}
		i, err := cl.Add(spec)
		if err == nil && n.Weight != nil && *n.Weight == 0 {
			err = cl.SetWeight(i, 0)
		}
		errs = append(errs, err)
	}
	if plan.LogLevel {
		rt.level.Set(lv)
	}
	rt.fc = nfc
	if plan.Health {
		rt.gw.RestartHealth(nfc.Health)
	}
	if nsrv != nil {
		rt.gw.Swap(nsrv, nln, nfc.ShutdownTimeout.Duration)
	}
	rt.log.Info("configuration reloaded", "file", rt.cfgFile, "changed", plan.String(), "policy", nfc.Policy, "nodes", len(nfc.Nodes))
	if err := errors.Join(errs...); err != nil {
		rt.log.Error("reload applied, but some node changes failed", "err", err)
	}
	return nil
}

// dupListener returns a second listener on ln's socket, so a new server
// accepts on it while the old one stops: no connection attempt is refused
// during a reload.
func dupListener(ln net.Listener) (net.Listener, error) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return nil, fmt.Errorf("reload: listener %T cannot be shared", ln)
	}
	f, err := tl.File()
	if err != nil {
		return nil, fmt.Errorf("reload: %w", err)
	}
	defer f.Close()
	nln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("reload: %w", err)
	}
	return nln, nil
}
