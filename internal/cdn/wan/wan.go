//go:build linux

// Package wan is a wide-area network on one machine for the CDN tier's lab
// tests: each PoP gets a network namespace whose only link is a TUN
// device, and a userspace switch in this process reads every IP packet from
// the TUN devices and writes it to the destination's after the delay of that
// pair (and optional loss), from an N×N matrix. This kernel has no netem
// qdisc, so delay is added here instead.
//
// PoP i (0-based) is 10.77.0.(i+1)/24 on device tun0 in namespace
// Prefix+ID+"-"+i; this host is HostAddr on a TUN of its own, with no delay,
// so that an operator or a test reaches every PoP directly. Namespaces are
// removed by Close; Down removes those left by a killed process.
package wan

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"shoal/internal/base/timeq"
)

// Prefix starts the name of every namespace this package creates.
const Prefix = "shoalwan-"

// Matrix holds the round-trip delay between each pair of PoPs in ms (the
// switch delays each direction by half) and optional loss ratios.
type Matrix struct {
	RTT  [][]float64
	Loss [][]float64 // nil: no loss
}

// ParseMatrix reads an N×N matrix file: one row per line, RTTs in ms
// separated by spaces or commas; '#' starts a comment.
func ParseMatrix(path string) (Matrix, error) {
	f, err := os.Open(path)
	if err != nil {
		return Matrix{}, fmt.Errorf("delay matrix: %w", err)
	}
	defer f.Close()
	var m Matrix
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		t, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.FieldsFunc(t, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
		if len(fields) == 0 {
			continue
		}
		var row []float64
		for _, x := range fields {
			v, err := strconv.ParseFloat(x, 64)
			if err != nil || v < 0 {
				return Matrix{}, fmt.Errorf("%s:%d: %q is not a delay in ms", path, line, x)
			}
			row = append(row, v)
		}
		m.RTT = append(m.RTT, row)
	}
	return m, m.Validate()
}

// Validate checks that the matrix is square and symmetric-free of negatives.
func (m Matrix) Validate() error {
	n := len(m.RTT)
	if n < 1 {
		return errors.New("delay matrix: empty")
	}
	for i, r := range m.RTT {
		if len(r) != n {
			return fmt.Errorf("delay matrix: row %d has %d entries, want %d", i+1, len(r), n)
		}
	}
	if m.Loss != nil && len(m.Loss) != n {
		return fmt.Errorf("delay matrix: loss has %d rows, want %d", len(m.Loss), n)
	}
	return nil
}

// HostAddr is this host's address on the WAN.
var HostAddr = netip.AddrFrom4([4]byte{10, 77, 0, 254})

// Addr returns PoP i's address.
func Addr(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 77, 0, byte(i + 1)}) }

// WAN is a running switch with its namespaces.
type WAN struct {
	ID  string
	NS  []string
	m   Matrix
	tun []*os.File

	mu      sync.Mutex
	q       timeq.Queue[pkt]
	wake    chan struct{}
	rng     *rand.Rand
	stop    chan struct{}
	wg      sync.WaitGroup
	lock    *os.File // the host-wide lab lock, held until Close
	Dropped uint64
	Sent    uint64
}

// pkt is a packet on its way to node to.
type pkt struct {
	to int
	b  []byte
}

func run(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// lockPath is the host-wide lock of the lab's subnet: two switches would
// both route 10.77.0.0/24 from the host, and one would lose its packets.
const lockPath = "/run/shoal-wan.lock"

// Start creates one namespace per row of m and starts the switch. It needs
// root (CAP_NET_ADMIN). Only one switch can own the lab's subnet on a host,
// so Start first waits until any other (another process's, another test
// package's) has closed.
func Start(ctx context.Context, m Matrix) (*WAN, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if len(m.RTT) > 250 {
		return nil, fmt.Errorf("wan: %d PoPs, at most 250", len(m.RTT))
	}
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("wan: lab lock: %w", err)
	}
	err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == syscall.EWOULDBLOCK {
		// Say so: a wait with no word looks like a hang (shoal up --pops as
		// root while a lab test runs).
		slog.Warn("wan: another WAN lab owns this host's lab subnet; waiting for it to close", "lock", lockPath)
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX)
	}
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("wan: lab lock %s: %w", lockPath, err)
	}
	w := &WAN{ID: fmt.Sprintf("%x", rand.Uint32()&0xffffff), m: m, wake: make(chan struct{}, 1),
		rng: rand.New(rand.NewPCG(rand.Uint64(), 1)), stop: make(chan struct{}), lock: lock}
	ok := false
	defer func() {
		if !ok {
			w.Close()
		}
	}()
	for i := range m.RTT {
		ns := fmt.Sprintf("%s%s-%d", Prefix, w.ID, i)
		if err := run(ctx, "ip", "netns", "add", ns); err != nil {
			return nil, err
		}
		w.NS = append(w.NS, ns)
		name := fmt.Sprintf("swan%s%d", w.ID, i)
		f, err := openTUN(name)
		if err != nil {
			return nil, err
		}
		w.tun = append(w.tun, f)
		for _, c := range [][]string{
			{"ip", "link", "set", name, "netns", ns},
			{"ip", "-n", ns, "link", "set", name, "name", "tun0"},
			{"ip", "-n", ns, "addr", "add", Addr(i).String() + "/24", "dev", "tun0"},
			{"ip", "-n", ns, "link", "set", "tun0", "up"},
			{"ip", "-n", ns, "link", "set", "lo", "up"},
		} {
			if err := run(ctx, c...); err != nil {
				return nil, err
			}
		}
	}
	host := fmt.Sprintf("swan%sh", w.ID)
	f, err := openTUN(host)
	if err != nil {
		return nil, err
	}
	w.tun = append(w.tun, f) // index len(NS): the host
	for _, c := range [][]string{
		{"ip", "addr", "add", HostAddr.String() + "/24", "dev", host},
		{"ip", "link", "set", host, "up"},
	} {
		if err := run(ctx, c...); err != nil {
			return nil, err
		}
	}
	for i := range w.tun {
		w.wg.Add(1)
		go w.read(i)
	}
	w.wg.Add(1)
	go w.deliver()
	ok = true
	return w, nil
}

func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("wan: /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("wan: TUNSETIFF %s: %w", name, err)
	}
	unix.SetNonblock(fd, true) // so that Close wakes the reader through the poller
	return os.NewFile(uintptr(fd), name), nil
}

// read takes PoP i's outgoing packets and queues each for its destination.
func (w *WAN) read(i int) {
	defer w.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, err := w.tun[i].Read(buf)
		if err != nil {
			return
		}
		if n < 20 || buf[0]>>4 != 4 {
			continue // IPv4 only
		}
		dst := netip.AddrFrom4([4]byte(buf[16:20])).As4()
		if dst[0] != 10 || dst[1] != 77 || dst[2] != 0 {
			continue
		}
		j := int(dst[3]) - 1
		if dst[3] == HostAddr.As4()[3] {
			j = len(w.NS)
		}
		if j < 0 || j >= len(w.tun) {
			continue
		}
		w.mu.Lock()
		hostPath := i == len(w.NS) || j == len(w.NS)
		if !hostPath && w.m.Loss != nil && w.rng.Float64() < w.m.Loss[i][j] {
			w.Dropped++
			w.mu.Unlock()
			continue
		}
		var d time.Duration
		if !hostPath {
			d = time.Duration(w.m.RTT[i][j] / 2 * float64(time.Millisecond))
		}
		w.q.Push(time.Now().Add(d), pkt{to: j, b: append([]byte(nil), buf[:n]...)})
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// deliverEarly is how early deliver may send a packet: it wakes that much
// before the next one is due and sends all that are due by then. A Go timer
// fires up to about a millisecond late (the poller waits in whole
// milliseconds), which made every link of the lab 1.2–1.4 ms longer a round
// trip than its matrix entry; waking early centres the error on zero
// without spinning (a spinning switch took a core from the tests beside it).
const deliverEarly = 500 * time.Microsecond

// deliver writes each packet to its destination's TUN when its time comes.
func (w *WAN) deliver() {
	defer w.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		w.mu.Lock()
		now := time.Now()
		var due []pkt
		for p, _, ok := w.q.PopDue(now.Add(deliverEarly)); ok; p, _, ok = w.q.PopDue(now.Add(deliverEarly)) {
			due = append(due, p)
		}
		next := time.Hour
		if at, ok := w.q.Next(); ok {
			next = at.Sub(now)
		}
		w.Sent += uint64(len(due))
		w.mu.Unlock()
		for _, p := range due {
			w.tun[p.to].Write(p.b)
		}
		t.Reset(next - deliverEarly)
		select {
		case <-w.stop:
			return
		case <-t.C:
		case <-w.wake:
		}
	}
}

// SetLoss sets the loss ratio from PoP i to PoP j (1 cuts the link, as in
// a partition).
func (w *WAN) SetLoss(i, j int, p float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m.Loss == nil {
		w.m.Loss = make([][]float64, len(w.m.RTT))
		for k := range w.m.Loss {
			w.m.Loss[k] = make([]float64, len(w.m.RTT))
		}
	}
	w.m.Loss[i][j] = p
}

// Exec returns a command that runs in PoP i's namespace.
func (w *WAN) Exec(ctx context.Context, i int, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", w.NS[i], name}, args...)...)
}

// Close stops the switch and removes the namespaces.
func (w *WAN) Close() error {
	select {
	case <-w.stop:
		return nil
	default:
	}
	close(w.stop)
	for _, f := range w.tun {
		f.Close()
	}
	w.wg.Wait()
	var errs []error
	for _, ns := range w.NS {
		if err := run(context.Background(), "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	w.lock.Close() // releases the flock: the next switch may start
	return errors.Join(errs...)
}

// Down removes every namespace left by a WAN whose process was killed.
func Down() error {
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), Prefix) {
			errs = append(errs, run(context.Background(), "ip", "netns", "del", filepath.Base(e.Name())))
		}
	}
	return errors.Join(errs...)
}
