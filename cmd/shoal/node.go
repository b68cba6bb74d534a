package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"shoal/internal/node"
)

func init() {
	register("node", "run a back-end web server over a site directory", runNode)
}

func runNode(args []string) error {
	fs := newFlags("node", "--root DIR [--listen ADDR] [flags]", "Run a shoal node: an HTTP/1.1 static server with a memory cache over DIR.")
	root := fs.String("root", "", "site root directory (required)")
	listen := fs.String("listen", "127.0.0.1:8081", "listen address")
	cacheMB := fs.Int64("cache-mb", node.DefaultCacheBytes>>20, "memory cache budget in MiB (0 disables)")
	policy := fs.String("cache", node.DefaultCachePolicy, "cache replacement policy: lru, gdsf or cgdsf")
	maxKB := fs.Int64("max-object-kb", node.DefaultMaxObject>>10, "files above this size are never cached (sendfile)")
	readTO := fs.Duration("read-timeout", node.DefaultReadTimeout, "limit for reading one request head")
	idleTO := fs.Duration("idle-timeout", node.DefaultIdleTimeout, "limit for an idle keep-alive connection")
	maxRanges := fs.Int("max-ranges", node.DefaultMaxRanges, "a request for more byte ranges gets the whole file")
	vhosts := fs.Bool("vhosts", false, "DIR holds one folder per host name (DIR/example.com/, DIR/_default/ for other hosts)")
	var aliases aliasFlag
	fs.Var(&aliases, "alias", "with --vhosts: NAME=SITE serves host NAME from DIR/SITE (repeatable)")
	noPre := fs.Bool("no-precompressed", false, "never serve name.br / name.gz in place of name (see 'shoal compress')")
	maxConns := fs.Int("max-conns", 0, "open client connections, handed-off ones included; idle ones are closed first at it (0: from RLIMIT_NOFILE, -1: no limit)")
	sendTO := fs.Duration("send-timeout", node.DefaultWriteTimeout, "close a connection whose client takes no response bytes for this long")
	accessLog := fs.String("access-log", "", "Common Log Format access log file, or - for stdout (default off)")
	repair := addRepairNodeFlags(fs)
	handoffSock := addPassFDNodeFlag(fs)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if *root == "" {
		fs.Usage()
		return errors.New("--root is required")
	}
	if *cacheMB < 0 || *maxKB < 0 {
		return fmt.Errorf("--cache-mb %d, --max-object-kb %d: sizes cannot be negative (0 turns the cache off)", *cacheMB, *maxKB)
	}
	cfg := node.Config{
		Root:            *root,
		CacheBytes:      *cacheMB << 20,
		CachePolicy:     *policy,
		MaxObject:       *maxKB << 10,
		ReadTimeout:     *readTO,
		IdleTimeout:     *idleTO,
		MaxRanges:       *maxRanges,
		NoPrecompressed: *noPre,
		VHosts:          *vhosts,
		Aliases:         aliases.m,
		WriteTimeout:    *sendTO,
		MaxConns:        *maxConns,
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	defer ignoreHangup(func(msg string) { cfg.Logger.Warn(msg) })()
	var err error
	if cfg.HandoffSocket, err = absSocket(*handoffSock); err != nil {
		return err
	}
	if *cacheMB == 0 {
		cfg.CacheBytes = -1
	}
	switch *accessLog {
	case "":
	case "-":
		cfg.AccessLog = os.Stdout
	default:
		f, err := os.OpenFile(*accessLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("access log: %w", err)
		}
		defer f.Close()
		cfg.AccessLog = f
	}
	srv, err := node.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	cfg.Logger.Info("node serving", "root", *root, "addr", ln.Addr().String(), "cache", *policy, "cache_mb", *cacheMB)

	if err := startPassFDNode(srv, cfg.HandoffSocket, cfg.Logger.Info); err != nil {
		ln.Close()
		return err
	}
	closeRepair, err := repair.startNode(srv, cfg.Logger.Info)
	if err != nil {
		ln.Close()
		return err
	}
	defer closeRepair()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case err := <-errc:
		return err
	case s := <-sig:
		cfg.Logger.Info("shutting down", "signal", s.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, node.ErrServerClosed) {
		return err
	}
	return nil
}

// aliasFlag collects --alias NAME=SITE.
type aliasFlag struct{ m map[string]string }

func (a *aliasFlag) String() string { return "" }

func (a *aliasFlag) Set(v string) error {
	name, site, ok := strings.Cut(v, "=")
	if !ok || name == "" || site == "" {
		return fmt.Errorf("want NAME=SITE, got %q", v)
	}
	if a.m == nil {
		a.m = map[string]string{}
	}
	a.m[name] = site
	return nil
}
