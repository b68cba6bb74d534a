package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"shoal/internal/base/store"
)

// sizeFlag is a byte size given as a number of MiB ("36") or with a unit
// ("36MiB", "36M", "1GiB", "512KiB"; the units are binary).
type sizeFlag struct {
	n   int64
	set bool
}

func (f *sizeFlag) String() string {
	if !f.set {
		return ""
	}
	return strconv.FormatInt(f.n>>20, 10) + "MiB"
}

// Set parses s; "" leaves the flag unset (a configuration file's default).
func (f *sizeFlag) Set(s string) error {
	if s == "" {
		return nil
	}
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	f.n, f.set = n, true
	return nil
}

// parseSize reads "36", "36M", "36MiB", "1G", "512K" (binary units; no
// unit means MiB).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1 << 20)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size (want e.g. 36MiB, 1GiB, or a number of MiB)", s)
	}
	return int64(n * float64(mult)), nil
}

// planMemory plans the memory of a process running nodes nodes: the limit
// is --memory when given, else the memory cgroup's; each node's store is
// cacheBytes when set by hand (> 0), else its share of the limit, and the
// Go runtime's soft limit and collector target are set from the plan
// (applyGoPlan). Without a limit nothing is planned: the stores take their
// defaults.
func planMemory(memory sizeFlag, nodes int, cacheBytes int64, logger *slog.Logger) store.Plan {
	limit, src := memory.n, "--memory"
	if !memory.set {
		var err error
		if limit, src, err = store.CgroupLimit(); err != nil {
			logger.Warn("cannot read the memory cgroup's limit; memory not planned", "err", err)
		}
	}
	p := store.PlanMemory(limit, src, nodes)
	if p.Short() {
		logger.Warn("the memory limit is below what a node was measured to live in under load; it may be killed",
			"limit_mib", p.Limit>>20, "source", p.Source, "least_mib", p.Least()>>20)
	}
	if cacheBytes > 0 {
		p = p.WithStore(cacheBytes)
	}
	applyGoPlan(&p)
	return p
}

// applyGoPlan sets the Go runtime's memory limit and collector target from
// p, except those GOMEMLIMIT and GOGC set in the environment (p then says
// 0 for them).
func applyGoPlan(p *store.Plan) {
	if os.Getenv("GOMEMLIMIT") != "" {
		p.GoLimit = 0
	}
	if os.Getenv("GOGC") != "" {
		p.GCPercent = 0
	}
	if p.GoLimit > 0 {
		debug.SetMemoryLimit(p.GoLimit)
	}
	if p.GCPercent > 0 {
		debug.SetGCPercent(p.GCPercent)
	}
	if p.Limit > 0 {
		// Nothing reads heap profiles here; their sample buckets would
		// take a MiB of the budget.
		runtime.MemProfileRate = 0
	}
}

// flagSet reports whether the flag name was given on the command line or
// by a configuration file.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
