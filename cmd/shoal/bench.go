package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"shoal/internal/cluster/handoff"
	"shoal/internal/tools/loadgen"
)

func init() {
	register("bench", "load generator: HTTP (closed/open loop, trace or Zipf) and a raw TCP client for the handoff experiments", runBench)
}

const benchUsage = `Usage: shoal bench <mode> [flags]

Modes:
  http     HTTP/1.1 load against a URL: closed loop or fixed rate, one URL, a CLF trace or a Zipf workload
  tcp      raw TCP client: connect, send B bytes, receive B bytes, close; per concurrency level
  sink     the matching TCP server: read B bytes, write B bytes, close (also over a handoff socket or repair port)
  l4front  raw TCP front: relay (splice), pass the descriptor (same host) or repair (across hosts)

tcp, sink and l4front measure when handing a connection to a node beats
relaying it (the relay/handoff crossover in docs/benchmarks.md).

Run 'shoal bench <mode> --help' for the flags of one mode.
`

func runBench(args []string) error {
	return runMode(args, benchUsage, map[string]func([]string) error{
		"http": benchHTTP, "tcp": benchTCP, "sink": benchSink, "l4front": benchL4Front,
	})
}

// runMode runs the mode named by args[0] with the rest of args, for the
// commands made of modes (bench, trace). -h, --help or help print usage on
// stdout, as every --help does; no mode and an unknown one print it on
// stderr and are errors.
func runMode(args []string, usage string, modes map[string]func([]string) error) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("missing mode")
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(os.Stdout, usage)
		return nil
	}
	if run, ok := modes[args[0]]; ok {
		return run(args[1:])
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown mode %q", args[0])
}

// interruptible returns a context cancelled by Ctrl-C or SIGTERM, so a run
// that is cut short still reports what it measured.
func interruptible() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// benchZipf is bench http's Zipf workload over the first files names of
// the index file, or of the printf pattern without one (all when files is 0).
func benchZipf(prefix, index, pattern string, files int, alpha float64, seed uint64) (loadgen.Workload, error) {
	var names []string
	var err error
	if index != "" {
		if names, err = loadgen.ReadIndex(index, prefix); err != nil {
			return nil, err
		}
		if files > 0 && files < len(names) {
			names = names[:files]
		}
	} else if names, err = loadgen.PatternNames(prefix, pattern, files); err != nil {
		return nil, fmt.Errorf("--files/--pattern: %w", err)
	}
	return loadgen.NewZipf(alpha, names, seed)
}

func benchHTTP(args []string) error {
	fs := newFlags("bench http", "--url URL [--connections C] [--duration D | --requests N] [--trace FILE | --zipf α --files N] [--rate R] [--json]",
		"HTTP/1.1 load generator: closed loop over persistent connections, or open loop at a fixed rate (latency from the intended send time)")
	rawURL := fs.String("url", "", "target URL (with --trace/--zipf: base URL whose path prefixes every target)")
	conns := fs.Int("connections", 64, "concurrent connections")
	duration := fs.Duration("duration", 0, "run time (default 10s unless --requests or a trace bounds the run)")
	requests := fs.Uint64("requests", 0, "number of requests (0 = bounded by --duration, or one pass over a trace; a trace shorter than N wraps around)")
	tracePath := fs.String("trace", "", "replay the URLs of this access log (CLF/EPA, plain or gzip) in log order")
	zipf := fs.Float64("zipf", 0, "Zipf exponent α ≥ 0 of a synthetic workload over --files files")
	files := fs.Int("files", 0, "number of files of the Zipf workload (default: all of --index)")
	pattern := fs.String("pattern", "/f%05d", "name of Zipf file k (1 = most popular), a printf pattern")
	index := fs.String("index", "", "file listing the site's URLs (\"URL\" or \"SIZE URL\" lines, e.g. a sample site's manifest.txt), most popular first; names the Zipf files instead of --pattern")
	seed := fs.Uint64("seed", 1, "Zipf random seed")
	rate := fs.Float64("rate", 0, "open loop: requests per second over all connections (0 = closed loop)")
	keepalive := fs.Bool("keepalive", true, "reuse connections (false: one connection per request, handshake included in latency)")
	connReqs := fs.Uint64("conn-requests", 0, "close each connection after this many requests and open a new one (0: keep it)")
	timeout := fs.Duration("timeout", 5*time.Second, "connect and per-request timeout")
	method := fs.String("method", "GET", "GET or HEAD")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout instead of the table")
	insecure := fs.Bool("insecure", false, "https: accept any certificate (a self-signed one, as shoal up --tls makes)")
	engine := fs.String("engine", loadgen.EngineGoroutines, "goroutines, or uring: all connections on one io_uring, a third less CPU on a core shared with the server (Linux; plain http, closed loop, keep-alive, Content-Length bodies)")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *rawURL == "" {
		return errors.New("--url is required")
	}
	if *duration > 0 && *requests > 0 {
		return errors.New("give --duration or --requests, not both")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *tracePath != "" && (set["zipf"] || set["index"] || set["files"]) {
		return errors.New("give --trace or --zipf, not both")
	}
	u, err := url.Parse(*rawURL)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	prefix := u.EscapedPath()

	cfg := loadgen.Config{
		URL: *rawURL, Connections: *conns, Duration: *duration, Requests: *requests, Rate: *rate,
		DisableKeepAlive: !*keepalive, ConnRequests: *connReqs, Timeout: *timeout, Method: *method, Insecure: *insecure,
		Engine: *engine,
	}
	if *tracePath != "" {
		if cfg.Workload, err = loadgen.LoadTrace(*tracePath, prefix, int(*requests)); err != nil {
			return err
		}
	} else if set["zipf"] || set["index"] || set["files"] {
		if cfg.Workload, err = benchZipf(prefix, *index, *pattern, *files, *zipf, *seed); err != nil {
			return err
		}
	}
	r, err := loadgen.New(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := interruptible()
	defer cancel()
	if err := r.Probe(ctx); err != nil {
		return err
	}
	stopBar := progress(r)
	res, err := r.Run(ctx)
	stopBar()
	if err != nil {
		return err
	}
	sum := loadgen.Summarize(cfg, res)
	if *asJSON {
		err = json.NewEncoder(os.Stdout).Encode(sum)
	} else {
		err = sum.WriteText(os.Stdout)
	}
	if err == nil && res.Requests == 0 {
		var failed uint64
		for _, n := range res.Errors {
			failed += n
		}
		if failed > 0 {
			err = fmt.Errorf("no request got an answer (%d failed)", failed)
		}
	}
	return err
}

// progress draws a bar on stderr while r runs, only when stderr is a
// terminal (a harness capturing output gets clean streams). It returns the
// function that stops and clears it.
func progress(r *loadgen.Runner) func() {
	if !term.IsTerminal(int(os.Stderr.Fd())) {
		return func() {}
	}
	byTime := r.Limit() == 0
	max := int64(r.Limit())
	desc := "requests"
	if byTime {
		max, desc = int64(r.Duration()/time.Millisecond), "ms"
	}
	bar := progressbar.NewOptions64(max, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription(desc),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
	done := make(chan struct{})
	stopped := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(stopped)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				bar.Finish()
				return
			case <-t.C:
				n := int64(r.Completed())
				if byTime {
					n = min(int64(time.Since(start)/time.Millisecond), max)
				}
				bar.Set64(n)
			}
		}
	}()
	return func() { close(done); <-stopped }
}

func benchTCP(args []string) error {
	fs := newFlags("bench tcp", "--addr ADDR [--connections 1,2,4,…,128] [--send-bytes B] [--recv-bytes B] [--duration D] [--json]",
		"connection-rate client (the TCP-migration experiment): each worker connects, sends B bytes, reads B bytes, closes, repeats; reports mean time per operation and operations/s per concurrency")
	addr := fs.String("addr", "", "server address host:port")
	levels := fs.String("connections", "1,2,4,8,16,32,64,128", "comma-separated concurrency levels")
	send := fs.Int("send-bytes", 100, "bytes sent per operation")
	recv := fs.Int("recv-bytes", 100, "bytes received per operation")
	duration := fs.Duration("duration", 5*time.Second, "run time of each level")
	timeout := fs.Duration("timeout", 5*time.Second, "per-operation timeout")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout instead of the table")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if *addr == "" {
		return errors.New("--addr is required")
	}
	var ns []int
	for _, f := range strings.Split(*levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("--connections: bad level %q", f)
		}
		ns = append(ns, n)
	}
	ctx, cancel := interruptible()
	defer cancel()
	var out []loadgen.TCPSummary
	if !*asJSON {
		fmt.Printf("%6s %10s %12s %12s %10s %10s %8s\n", "conns", "ops", "ops/s", "mean ms/op", "p50 ms", "p99 ms", "errors")
	}
	for _, n := range ns {
		if ctx.Err() != nil {
			break
		}
		res, err := loadgen.RunTCP(ctx, loadgen.TCPConfig{Addr: *addr, Connections: n, SendBytes: *send, RecvBytes: *recv,
			Duration: *duration, Timeout: *timeout})
		if err != nil {
			return err
		}
		s := loadgen.SummarizeTCP(res)
		out = append(out, s)
		if !*asJSON {
			var errs uint64
			for _, e := range s.Errors {
				errs += e
			}
			fmt.Printf("%6d %10d %12.1f %12.3f %10.3f %10.3f %8d\n", n, s.Ops, s.OpsPerSec, s.LatencyMS.Mean, s.LatencyMS.P50, s.LatencyMS.P99, errs)
		}
	}
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{
			"addr": *addr, "send_bytes": *send, "recv_bytes": *recv, "levels": out})
	}
	return nil
}

func benchSink(args []string) error {
	fs := newFlags("bench sink", "--listen ADDR [--handoff-socket PATH] [--repair-listen ADDR --repair-key-file FILE] [--recv-bytes B] [--send-bytes B] [--echo]",
		"the server of the connection-rate experiment: per connection read B bytes, write B bytes, close; runs until interrupted")
	listen := fs.String("listen", "127.0.0.1:9000", "listen address")
	sock := fs.String("handoff-socket", "", "also serve connections passed over SCM_RIGHTS on this Unix socket (bench l4front --path passfd)")
	repair := addRepairNodeFlags(fs)
	recv := fs.Int("recv-bytes", 100, "bytes read from each connection")
	send := fs.Int("send-bytes", 100, "bytes written back before closing")
	echo := fs.Bool("echo", false, "reply with the bytes read instead of --send-bytes zeros (lets a client checksum the round trip)")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var key []byte
	if *repair.listen != "" {
		var err error
		if key, err = readRepairKey(*repair.keyFile); err != nil {
			return fmt.Errorf("sink: %w", err)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	s := &loadgen.Sink{Recv: *recv, Send: *send, Echo: *echo}
	ctx, cancel := interruptible()
	defer cancel()
	errs := make(chan error, 2)
	serving := 1
	if *sock != "" {
		fl, err := handoff.ListenFD(*sock)
		if err != nil {
			ln.Close()
			return fmt.Errorf("sink: %w", err)
		}
		serving++
		go func() { errs <- s.Serve(fl) }()
		fmt.Fprintf(os.Stderr, "sink handoff socket %s\n", fl.Path())
	}
	if *repair.listen != "" {
		report, err := serveRepairSink(s, *repair.listen, key, errs)
		if err != nil {
			s.Close()
			ln.Close()
			return fmt.Errorf("sink: %w", err)
		}
		serving++
		defer report()
	}
	go func() { errs <- s.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "sink listening on %s (recv %d, send %d)\n", ln.Addr(), *recv, *send)
	go func() { <-ctx.Done(); s.Close() }()
	var first error
	for range serving {
		if err := <-errs; err != nil && first == nil {
			first = err
			s.Close() // one listener failed: stop the other too
		}
	}
	return first
}
