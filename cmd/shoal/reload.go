package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/policy"
	"shoal/internal/config"
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
	cl       *control.Cluster
	sw       *policy.Switch
	cur      atomic.Pointer[front.Server]
	ln       net.Listener
	mk       func(config.Front) (*front.Server, error)
	level    *slog.LevelVar
	log      *slog.Logger
	access   *front.AccessLog
	errc     chan error

	healthStop context.CancelFunc
}

// serve runs srv on ln and reports an error other than a normal stop.
func (rt *frontRuntime) serve(srv *front.Server, ln net.Listener) {
	if err := srv.Serve(ln); err != nil && !errors.Is(err, front.ErrServerClosed) {
		rt.errc <- err
	}
}

// startHealth (re)starts the active health checks with rt.fc's settings.
func (rt *frontRuntime) startHealth() {
	if rt.healthStop != nil {
		rt.healthStop()
		rt.healthStop = nil
	}
	h := rt.fc.Health
	if h.Interval.Duration <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt.healthStop = cancel
	go rt.cl.Check(ctx, control.CheckConfig{Interval: h.Interval.Duration, Rise: h.Rise, Fall: h.Fall})
}

// reload reads the configuration file again and applies it, all or
// nothing; the access log is reopened either way (logrotate).
func (rt *frontRuntime) reload() error {
	if rt.access != nil {
		if err := rt.access.Reopen(); err != nil {
			rt.log.Error("access log reopen", "err", err)
		}
	}
	if rt.cfgFile == "" {
		return errors.New("started without --config: nothing to reload (the access log was reopened)")
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
		if nsrv, err = rt.mk(nfc); err != nil {
			return err
		}
		if nln, err = dupListener(rt.ln); err != nil {
			return err
		}
	}
	// From here on nothing can fail but a node change the file's
	// validation did not foresee; those are logged, the rest applies.
	if newPol != nil {
		rt.cl.WithPolicy(func(policy.Policy, *policy.Cluster) { rt.sw.Set(newPol) }) // under the cluster's lock
	}
	byURL := map[string]*control.Backend{}
	for _, b := range rt.cl.Backends() {
		byURL[b.URL] = b
	}
	var errs []error
	for _, u := range plan.Remove {
		if b := byURL[u]; b != nil {
			errs = append(errs, rt.cl.Remove(b.Index))
		}
	}
	for u, w := range plan.Weight {
		if b := byURL[u]; b != nil {
			errs = append(errs, rt.cl.SetWeight(b.Index, w))
		}
	}
	for _, n := range plan.Add {
		spec := control.NodeSpec{URL: n.URL, Group: n.Group}
		if n.Weight != nil {
			spec.Weight = *n.Weight
		}
		i, err := rt.cl.Add(spec)
		if err == nil && n.Weight != nil && *n.Weight == 0 {
			err = rt.cl.SetWeight(i, 0)
		}
		errs = append(errs, err)
	}
	if plan.LogLevel {
		rt.level.Set(lv)
	}
	rt.fc = nfc
	if plan.Health {
		rt.startHealth()
	}
	if nsrv != nil {
		old := rt.cur.Swap(nsrv)
		rt.ln = nln
		go rt.serve(nsrv, nln)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), nfc.ShutdownTimeout.Duration)
			defer cancel()
			old.Shutdown(ctx) // closes its copy of the listener; the socket stays open in nln
		}()
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
