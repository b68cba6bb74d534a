// Package deploy holds the systemd units of a multi-host shoal deployment
// and the test of docs/deploy.md: the guide's relay and repair recipes run
// in network namespaces that stand for hosts, with exactly the commands the
// guide gives.
package deploy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// hosts are the guide's hosts and their LAN addresses (docs/deploy.md).
var hosts = []struct{ name, addr string }{
	{"front", "10.0.0.10"}, {"node1", "10.0.0.11"}, {"node2", "10.0.0.12"}, {"client", "10.0.0.2"},
}

// block is one tested fenced block of the guide: the host it runs on and
// its lines.
type block struct {
	host  string
	lines []string
}

// guideBlocks returns the blocks of docs/deploy.md tagged
// "sh deploy-test:<recipe>", in order; the first line of each is
// "# <host>".
func guideBlocks(t *testing.T, recipe string) []block {
	t.Helper()
	data, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	var cur *block
	hostLine := regexp.MustCompile(`^# (front|node\d|client)$`)
	for i, l := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && l == "```sh deploy-test:"+recipe:
			cur = &block{}
		case cur != nil && l == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil && cur.host == "":
			m := hostLine.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("deploy.md:%d: a deploy-test block must start with \"# HOST\", got %q", i+1, l)
			}
			cur.host = m[1]
		case cur != nil:
			cur.lines = append(cur.lines, l)
		}
	}
	if len(out) == 0 {
		t.Fatalf("docs/deploy.md has no block tagged deploy-test:%s", recipe)
	}
	return out
}

// step is a piece of a block: a shell script to run to its end, a daemon
// (`shoal front`, `shoal node`) to start, or an scp the test carries out.
type step struct {
	kind string // "sh", "daemon", "scp"
	text string
}

// steps splits a block's lines: backslash continuations are joined outside
// here-documents, lines starting with "shoal front"/"shoal node" become
// daemons, "scp" lines copies, everything else shell script.
func steps(lines []string) []step {
	var out []step
	var sh []string
	flush := func() {
		if len(sh) > 0 {
			out = append(out, step{"sh", strings.Join(sh, "\n")})
			sh = nil
		}
	}
	heredoc := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if heredoc != "" {
			sh = append(sh, l)
			if l == heredoc {
				heredoc = ""
			}
			continue
		}
		for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
			i++
			l = strings.TrimSuffix(l, "\\") + strings.TrimLeft(lines[i], " ")
		}
		if m := regexp.MustCompile(`<<'?(\w+)'?`).FindStringSubmatch(l); m != nil {
			heredoc = m[1]
		}
		switch {
		case strings.HasPrefix(l, "shoal front ") || strings.HasPrefix(l, "shoal node "):
			flush()
			out = append(out, step{"daemon", l})
		case strings.HasPrefix(l, "scp "):
			flush()
			out = append(out, step{"scp", l})
		default:
			sh = append(sh, l)
		}
	}
	flush()
	return out
}

// TestStepsSplit checks the splitting on a hand-made block.
func TestStepsSplit(t *testing.T) {
	got := steps([]string{
		"# a comment", "sysctl -w a=1 \\", "  b=2", "cat > f <<'EOF'", "shoal node --in-heredoc", "EOF",
		"scp -p front:/x /x", "shoal node --root /r \\", "  --listen 1:2", "echo done",
	})
	want := []step{
		{"sh", "# a comment\nsysctl -w a=1 b=2\ncat > f <<'EOF'\nshoal node --in-heredoc\nEOF"},
		{"scp", "scp -p front:/x /x"},
		{"daemon", "shoal node --root /r --listen 1:2"},
		{"sh", "echo done"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("steps:\n got %q\nwant %q", got, want)
	}
}

// lab is the namespaces standing for the guide's hosts.
type lab struct {
	t       *testing.T
	id      string
	bin     string
	holders map[string]*exec.Cmd // per host: sleeps in its netns and private mount ns
	mu      sync.Mutex
	daemons []*exec.Cmd
	logs    map[*exec.Cmd]*bytes.Buffer
	names   map[*exec.Cmd]string
	recipe  string
	// passwd and group are the hosts' copies with the user shoal.
	passwd, group string
}

// The user the units run as, in the test's hosts.
const shoalUser, shoalUID = "shoal", "64999"

// unitOf names the unit in deploy/ that runs a guide's daemon line on
// recipe.
func unitOf(recipe, line string) string {
	node := strings.HasPrefix(line, "shoal node ")
	switch {
	case recipe == "repair" && node:
		return "shoal-node-repair@.service"
	case recipe == "repair":
		return "shoal-front-repair.service"
	case node:
		return "shoal-node@.service"
	}
	return "shoal-front.service"
}

// unitCaps returns the AmbientCapabilities a unit file grants, as setpriv
// names them ("net_admin").
func unitCaps(t *testing.T, unit string) []string {
	data, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	var caps []string
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "AmbientCapabilities="); ok {
			for _, c := range strings.Fields(v) {
				caps = append(caps, strings.ToLower(strings.TrimPrefix(c, "CAP_")))
			}
		}
	}
	return caps
}

// asUnit wraps a daemon line so that it runs as user shoal with exactly
// the ambient (and bounding) capabilities of its unit, as systemd would.
func (l *lab) asUnit(line string) []string {
	unit := unitOf(l.recipe, line)
	set := "-all"
	for _, c := range unitCaps(l.t, unit) {
		set += ",+" + c
	}
	return []string{"setpriv", "--reuid=" + shoalUser, "--regid=" + shoalUser, "--clear-groups",
		"--inh-caps=" + set, "--ambient-caps=" + set, "--bounding-set=" + set, "sh", "-c", "exec " + line}
}

func (l *lab) ns(host string) string { return "shoal-" + l.id + "-" + host }

func (l *lab) run(args ...string) {
	l.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		l.t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// up builds the LAN: a bridge in its own namespace and one namespace per
// host with a veth eth0 on it, and for each host a holder process with
// private tmpfs on /etc/shoal and /srv/shoal (each host has its own) and
// /etc/passwd and /etc/group that know the user shoal (systemd-sysusers
// with deploy/shoal.sysusers stands behind that on a real host).
func (l *lab) up() {
	t := l.t
	dir := t.TempDir()
	l.passwd, l.group = filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	for _, f := range []struct{ from, to, line string }{
		{"/etc/passwd", l.passwd, shoalUser + ":x:" + shoalUID + ":" + shoalUID + ":shoal web cluster:/var/lib/shoal:/usr/sbin/nologin\n"},
		{"/etc/group", l.group, shoalUser + ":x:" + shoalUID + ":\n"},
	} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.to, append(b, f.line...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sw := l.ns("sw")
	l.run("ip", "netns", "add", sw)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", sw).Run() })
	l.run("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
	l.run("ip", "-n", sw, "link", "set", "br0", "up")
	for _, h := range hosts {
		ns := l.ns(h.name)
		l.run("ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		l.run("ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", h.name, "netns", sw)
		l.run("ip", "-n", sw, "link", "set", h.name, "master", "br0", "up")
		l.run("ip", "-n", ns, "link", "set", "lo", "up")
		l.run("ip", "-n", ns, "addr", "add", h.addr+"/24", "dev", "eth0")
		l.run("ip", "-n", ns, "link", "set", "eth0", "up")

		cmd := exec.Command("ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private", "sh", "-c",
			"mount -t tmpfs tmpfs /etc/shoal && mount -t tmpfs tmpfs /srv/shoal && "+
				"mount --bind -o ro "+l.passwd+" /etc/passwd && mount --bind -o ro "+l.group+" /etc/group && "+
				"echo ready && exec sleep 3600")
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "ready\n" {
			t.Fatalf("host %s: holder did not start (%q)", h.name, line)
		}
		l.holders[h.name] = cmd
	}
}

// enter returns a command running args on host (its network and mount
// namespaces), with the test's shoal first on PATH.
func (l *lab) enter(ctx context.Context, host string, args ...string) *exec.Cmd {
	pid := strconv.Itoa(l.holders[host].Process.Pid)
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", pid, "-n", "-m", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(l.bin)+":"+os.Getenv("PATH"))
	return cmd
}

// root is host's file system as its processes see it.
func (l *lab) root(host string) string {
	return fmt.Sprintf("/proc/%d/root", l.holders[host].Process.Pid)
}

// scp carries out "scp [-p] [HOST:]SRC [HOST:]DST" run on host, copying
// between the hosts' own folders (mode kept).
func (l *lab) scp(host, line string) {
	l.t.Helper()
	var args []string
	for _, a := range strings.Fields(line)[1:] {
		if !strings.HasPrefix(a, "-") {
			args = append(args, a)
		}
	}
	if len(args) != 2 {
		l.t.Fatalf("scp: want SRC DST in %q", line)
	}
	path := func(a string) string {
		if h, p, ok := strings.Cut(a, ":"); ok {
			return l.root(h) + p
		}
		return l.root(host) + a
	}
	src, dst := path(args[0]), path(args[1])
	fi, err := os.Stat(src)
	if err != nil {
		l.t.Fatalf("%s on %s: %v", line, host, err)
	}
	b, _ := os.ReadFile(src)
	if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
		l.t.Fatalf("%s on %s: %v", line, host, err)
	}
	os.Chmod(dst, fi.Mode().Perm())
}

// daemon starts a long-running guide command on host.
func (l *lab) daemon(host, line string) {
	cmd := l.enter(context.Background(), host, l.asUnit(line)...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		l.t.Fatalf("%s on %s: %v", line, host, err)
	}
	l.mu.Lock()
	l.daemons = append(l.daemons, cmd)
	l.logs[cmd] = &buf
	l.names[cmd] = host + " (" + unitOf(l.recipe, line) + "): " + line
	l.mu.Unlock()
}

// stop ends the daemons (SIGTERM, then SIGKILL after 5 s), last started
// first, and logs their output when the test failed.
func (l *lab) stop() {
	for i := len(l.daemons) - 1; i >= 0; i-- {
		cmd := l.daemons[i]
		cmd.Process.Signal(syscall.SIGTERM)
		testutil.WaitOrKill(cmd, 5*time.Second)
		if l.t.Failed() || testing.Verbose() {
			l.t.Logf("--- %s\n%s", l.names[cmd], l.logs[cmd].String())
		}
	}
}

// ensureDir makes dir if missing and removes it (if still empty) at the
// end: the holders mount their own tmpfs on it.
func ensureDir(t *testing.T, dir string) {
	if _, err := os.Stat(dir); err == nil {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
}

var buildOnce sync.Once
var builtBin string
var buildErr error

// shoalBin builds the shoal command once into a folder removed at exit.
func shoalBin(t *testing.T) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shoal-deploy-bin-")
		if err != nil {
			buildErr = err
			return
		}
		os.Chmod(dir, 0o755) // the daemons run as the user shoal
		builtBin = filepath.Join(dir, "shoal")
		if out, err := exec.Command("go", "build", "-o", builtBin, "../cmd/shoal").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// TestGuideRecipes runs the relay, repair and publish recipes of
// docs/deploy.md in namespaces standing for the guide's hosts — the
// daemons as user shoal with only their unit's capabilities — and checks
// that the client gets the page through the front (for publish, the
// version `shoal publish` pushed to both nodes); for repair, that the
// front moved the connection (repair.moved) rather than relayed it. Root only; run it
// under `flock /work/lab.lock`.
func TestGuideRecipes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	for _, tool := range []string{"ip", "nsenter", "unshare", "setpriv", "curl", "openssl", "sysctl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	bin := shoalBin(t)
	for _, recipe := range []string{"relay", "repair", "publish"} {
		t.Run(recipe, func(t *testing.T) {
			blocks := guideBlocks(t, recipe)
			ensureDir(t, "/etc/shoal")
			ensureDir(t, "/srv/shoal")
			var id [3]byte
			rand.Read(id[:])
			l := &lab{t: t, id: "dt" + hex.EncodeToString(id[:]), bin: bin, recipe: recipe, holders: map[string]*exec.Cmd{},
				logs: map[*exec.Cmd]*bytes.Buffer{}, names: map[*exec.Cmd]string{}}
			l.up()
			t.Cleanup(l.stop)

			var clientOut string
			for _, b := range blocks {
				for _, s := range steps(b.lines) {
					switch s.kind {
					case "daemon":
						l.daemon(b.host, s.text)
					case "scp":
						l.scp(b.host, s.text)
					case "sh":
						ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
						cmd := l.enter(ctx, b.host, "sh", "-ec", s.text)
						out, err := cmd.CombinedOutput()
						cancel()
						t.Logf("%s$ %s\n%s", b.host, s.text, out)
						if err != nil {
							t.Fatalf("on %s: %v", b.host, err)
						}
						if b.host == "client" {
							clientOut = string(out)
						}
					}
				}
			}
			if !strings.Contains(clientOut, "It works") {
				t.Fatalf("the client got %q, want the guide's page", clientOut)
			}
			st := l.stats(t)
			t.Logf("front stats: paths %v, repair %v", st.Paths, st.Repair)
			switch recipe {
			case "relay", "publish":
				if st.Paths["relay"] < 1 {
					t.Errorf("relay requests %d, want the client's", st.Paths["relay"])
				}
			case "repair":
				if st.Repair["moved"] < 1 {
					t.Errorf("repair moved %d connections, want the client's moved to a node", st.Repair["moved"])
				}
				// The node's unit lets it attach its eBPF guard, so the
				// front steers before the freeze instead of holding.
				if st.Repair["steered_early"] < 1 || st.Repair["held"] != 0 {
					t.Errorf("repair steered early %d, held %d: want the node guarded (its unit's CAP_BPF)", st.Repair["steered_early"], st.Repair["held"])
				}
			}
		})
	}
}

// frontStats is the part of the admin API's /stats the test reads.
type frontStats struct {
	Paths  map[string]uint64 `json:"paths"`
	Repair map[string]uint64 `json:"repair"`
}

// stats reads the front's /stats with the token the guide made.
func (l *lab) stats(t *testing.T) frontStats {
	tok, err := os.ReadFile(l.root("front") + "/etc/shoal/admin.token")
	if err != nil {
		t.Fatal(err)
	}
	cmd := l.enter(context.Background(), "front", "curl", "-sS", "--fail", "-H",
		"Authorization: Bearer "+strings.TrimSpace(string(tok)), "http://10.0.0.10:9090/stats")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, io.Discard
	if err := cmd.Run(); err != nil {
		t.Fatalf("front /stats: %v", err)
	}
	var st struct {
		Front frontStats `json:"front"`
		frontStats
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("front /stats: %v: %s", err, out.String())
	}
	if st.Front.Paths != nil {
		return st.Front
	}
	return st.frontStats
}
