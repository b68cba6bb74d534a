package up

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shoal/internal/admin"
	"shoal/internal/cluster/handoff"
	"shoal/internal/tools/site"
)

var shoalBuild struct {
	sync.Once
	dir, path string
	err       error
}

// TestMain removes the shoal binary built by shoalBinary.
func TestMain(m *testing.M) {
	code := m.Run()
	if shoalBuild.dir != "" {
		os.RemoveAll(shoalBuild.dir)
	}
	os.Exit(code)
}

// shoalBinary builds cmd/shoal once per test binary run.
func shoalBinary(t *testing.T) string {
	t.Helper()
	shoalBuild.Do(func() {
		if shoalBuild.dir, shoalBuild.err = os.MkdirTemp("", "shoal-up-test-"); shoalBuild.err != nil {
			return
		}
		shoalBuild.path = filepath.Join(shoalBuild.dir, "shoal")
		if out, err := exec.Command("go", "build", "-o", shoalBuild.path, "shoal/cmd/shoal").CombinedOutput(); err != nil {
			shoalBuild.err = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if shoalBuild.err != nil {
		t.Fatal(shoalBuild.err)
	}
	return shoalBuild.path
}

// needLab skips a test that builds a lab unless this process may.
func needLab(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a network-namespace lab and the shoal binary")
	}
	if err := privileges(); err != nil {
		t.Skipf("the repair lab needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN): %v", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the repair lab needs iproute2's ip command")
	}
}

// assertLabGone checks that nothing of lab id is left on the host: no
// namespace, no veth, no route to the lab prefix.
func assertLabGone(t *testing.T, id string, prefix netip.Prefix) {
	t.Helper()
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), handoff.LabPrefix+id+"-") {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
	if _, err := net.InterfaceByName(handoff.LabPrefix + id); err == nil {
		t.Errorf("host veth %s left behind", handoff.LabPrefix+id)
	}
	if prefix.IsValid() {
		routes, err := hostPrefixes()
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(routes, prefix) {
			t.Errorf("route to %v left behind", prefix)
		}
	}
}

func TestCapsAllow(t *testing.T) {
	for _, c := range []struct {
		status string
		miss   []string // names the error must mention; nil: allowed
	}{
		{"Name:\tshoal\nCapEff:\t000001ffffffffff\n", nil},
		{"CapEff:\t0000000000000000\n", []string{"CAP_NET_ADMIN", "CAP_SYS_ADMIN"}},
		{"CapEff:\t0000000000001000\n", []string{"CAP_SYS_ADMIN"}},
		{"Name:\tshoal\n", []string{"CapEff"}},
	} {
		err := capsAllow(c.status)
		if (err == nil) != (c.miss == nil) {
			t.Errorf("%q: %v", c.status, err)
			continue
		}
		for _, m := range c.miss {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%q: error %q does not name %s", c.status, err, m)
			}
		}
	}
}

// TestStartRepairNeedsRoot: without the privileges, StartRepair says why
// and what to do instead, before touching anything.
func TestStartRepairNeedsRoot(t *testing.T) {
	saved := privileges
	privileges = func() error { return errors.New("this process lacks CAP_NET_ADMIN") }
	defer func() { privileges = saved }()
	dataDir := t.TempDir()
	_, err := StartRepair(Config{DataDir: dataDir}, RepairConfig{})
	if !errors.Is(err, ErrNeedRoot) {
		t.Fatalf("err = %v, want ErrNeedRoot", err)
	}
	for _, want := range []string{"CAP_NET_ADMIN", "sudo", "--path relay"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if ents, _ := os.ReadDir(dataDir); len(ents) != 0 {
		t.Errorf("generated %d entries before refusing", len(ents))
	}
}

// TestStartRepair is `shoal up --path repair` through the API: the sample
// site is fetched from this (the root) namespace through the VIP with a
// real HTTP client, every body checked against the manifest's size and the
// file's SHA-256; the front's repair counters show the connections were
// moved to the nodes and the front wrote no response byte; Shutdown leaves
// no namespace, veth or route behind.
func TestStartRepair(t *testing.T) {
	needLab(t)
	exe := shoalBinary(t)
	dataDir := t.TempDir()
	logs, err := os.Create(filepath.Join(t.TempDir(), "cluster.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	r, err := StartRepair(Config{DataDir: dataDir, Nodes: 3, HealthInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, RepairConfig{Exe: exe, Stderr: logs})
	if err != nil {
		b, _ := os.ReadFile(logs.Name())
		t.Fatalf("%v\nlogs:\n%s", err, b)
	}
	prefix := netip.PrefixFrom(r.HostAddr, 24).Masked()
	defer func() {
		r.Close()
		assertLabGone(t, r.Lab.ID, prefix)
	}()
	if !strings.HasPrefix(r.URL, "http://"+r.Lab.VIP.String()+":") {
		t.Errorf("URL %s is not on the VIP %s", r.URL, r.Lab.VIP)
	}

	root := filepath.Join(dataDir, "site")
	files, err := site.Manifest(root)
	if err != nil {
		t.Fatal(err)
	}
	// The largest file, the manifest itself, and files spread over the rest.
	slices.SortFunc(files, func(a, b site.File) int { return int(b.Size - a.Size) })
	picks := []site.File{files[0]}
	for i := 1; i < len(files); i += len(files) / 10 {
		picks = append(picks, files[i])
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, f := range picks {
		resp, err := client.Get(strings.TrimSuffix(r.URL, "/") + f.URL)
		if err != nil {
			t.Fatalf("GET %s: %v", f.URL, err)
		}
		h := sha256.New()
		n, err := io.Copy(h, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s, %d bytes, %v", f.URL, resp.Status, n, err)
		}
		want, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.URL)))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(want); n != f.Size || !slices.Equal(h.Sum(nil), sum[:]) {
			t.Errorf("GET %s: %d bytes (manifest %d), checksum match %v", f.URL, n, f.Size, slices.Equal(h.Sum(nil), sum[:]))
		}
	}

	// The front counts a move after the node's acknowledgement, which may
	// come after the client already has the response: wait until every
	// request has an outcome (moved, relayed or lost).
	var st admin.Stats
	for deadline := time.Now().Add(10 * time.Second); ; {
		st = frontStats(t, client, r.AdminURL, r.AdminToken)
		if rp := st.Repair; rp == nil || rp.Moved+rp.FallbackFreeze+rp.FallbackNode+rp.Lost >= uint64(len(picks)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d files fetched; front: %d requests, %d bytes out, repair %+v", len(picks), st.Requests, st.BytesOut, st.Repair)
	if st.Repair == nil {
		t.Fatal("front /stats has no repair counters")
	}
	// Every connection carried one request and was moved (the health
	// checks come from the front itself, not through the VIP).
	if rp := st.Repair; rp.Moved < uint64(len(picks)) || rp.Lost+rp.FallbackFreeze+rp.FallbackNode != 0 || st.BytesOut != 0 {
		t.Errorf("front: moved %d connections for %d requests, relayed %d, lost %d, wrote %d response bytes (want all moved, 0 bytes)",
			rp.Moved, len(picks), rp.FallbackFreeze+rp.FallbackNode, rp.Lost, st.BytesOut)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	for i, sv := range r.children {
		if !sv.exited() {
			t.Errorf("child %d still running after Shutdown", i)
		}
	}
	assertLabGone(t, r.Lab.ID, prefix)
}

// frontStats reads the front's counters from its admin API, which on the
// lab's address wants the token for reads too.
func frontStats(t *testing.T, client *http.Client, adminURL, token string) admin.Stats {
	t.Helper()
	req, err := http.NewRequest("GET", adminURL+"/stats", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st admin.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStartRepairFailureCleansUp: when the cluster cannot start (here the
// "shoal" binary exits at once), StartRepair returns the child's error and
// leaves nothing behind.
func TestStartRepairFailureCleansUp(t *testing.T) {
	needLab(t)
	falseExe, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false command")
	}
	siteDir := t.TempDir()
	os.WriteFile(filepath.Join(siteDir, "a.txt"), []byte("a"), 0o644)
	var mu sync.Mutex
	var cmds []string
	_, err = StartRepair(Config{Site: siteDir, Nodes: 2}, RepairConfig{Exe: falseExe, Log: func(c string) {
		mu.Lock()
		cmds = append(cmds, c)
		mu.Unlock()
	}})
	if err == nil {
		t.Fatal("StartRepair with a failing binary succeeded")
	}
	t.Logf("StartRepair: %v", err)
	mu.Lock()
	defer mu.Unlock()
	id := ""
	for _, c := range cmds {
		if m := regexp.MustCompile(`^ip netns add ` + handoff.LabPrefix + `([0-9a-f]+)-sw$`).FindStringSubmatch(c); m != nil {
			id = m[1]
		}
	}
	if id == "" {
		t.Fatalf("no lab was built: %q", cmds)
	}
	assertLabGone(t, id, netip.Prefix{})
}

// TestUpRepairSIGTERM runs `shoal up --path repair`, fetches a file
// through the VIP with the printed URL, sends SIGTERM and checks that the
// command exits cleanly and removes the lab.
func TestUpRepairSIGTERM(t *testing.T) {
	needLab(t)
	exe := shoalBinary(t)
	siteDir := t.TempDir()
	body := strings.Repeat("shoal repair ", 20000)
	os.WriteFile(filepath.Join(siteDir, "big.txt"), []byte(body), 0o644)
	cmd := exec.Command(exe, "up", "--path", "repair", "--nodes", "2", "--site", siteDir, "--data", t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	// The banner: the URL, the curl line, the lab's id.
	var url, curl, id, hostAddr string
	hang := time.After(60 * time.Second) // a guard against a hung start, not a timing assert
	reURL := regexp.MustCompile(`^shoal is up: open (http://\S+)$`)
	reLab := regexp.MustCompile(`^\s+lab ([0-9a-f]+): .* as ([0-9.]+);`)
	var banner []string
read:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("shoal up exited before it was up: %v\nstdout:\n%s\nstderr:\n%s", cmd.Wait(), strings.Join(banner, "\n"), stderr.String())
			}
			banner = append(banner, l)
			if m := reURL.FindStringSubmatch(l); m != nil {
				url = m[1]
			}
			if m := reLab.FindStringSubmatch(l); m != nil {
				id, hostAddr = m[1], m[2]
			}
			if c, ok := strings.CutPrefix(strings.TrimSpace(l), "curl "); ok {
				curl = c
			}
			if strings.Contains(l, "Ctrl-C stops it") {
				break read
			}
		case <-hang:
			t.Fatalf("shoal up not up after 60 s:\n%s\nstderr:\n%s", strings.Join(banner, "\n"), stderr.String())
		}
	}
	go func() {
		for range lines { // drain the rest
		}
	}()
	if url == "" || id == "" || curl != url {
		t.Fatalf("banner lacks the URL, the curl command or the lab id:\n%s", strings.Join(banner, "\n"))
	}
	if _, err := os.Stat("/run/netns/" + handoff.LabPrefix + id + "-front"); err != nil {
		t.Fatalf("lab %s: %v", id, err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url + "big.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(got) != body {
		t.Errorf("GET big.txt: %d bytes of %d, %v", len(got), len(body), err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		killed = true
		if err != nil {
			t.Errorf("shoal up after SIGTERM: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("shoal up still running 60 s after SIGTERM\nstderr:\n%s", stderr.String())
	}
	host, err := netip.ParseAddr(hostAddr)
	if err != nil {
		t.Fatalf("host address %q: %v", hostAddr, err)
	}
	assertLabGone(t, id, netip.PrefixFrom(host, 24).Masked())
}
