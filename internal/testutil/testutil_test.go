package testutil

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestStartReady re-executes this test binary as a helper that prints a
// line, READY, two more lines, reads one line of stdin and echoes it.
func TestStartReady(t *testing.T) {
	if os.Getenv("TESTUTIL_HELPER") == "1" {
		os.Stdout.WriteString("before\nREADY\nafter 1\n")
		var b [64]byte
		n, _ := os.Stdin.Read(b[:])
		os.Stdout.WriteString("got " + string(b[:n]))
		os.Exit(0)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestStartReady$")
	cmd.Env = append(os.Environ(), "TESTUTIL_HELPER=1")
	var out SyncBuf
	p, in := StartReady(t, cmd, &out, "helper")
	in.Write([]byte("ping\n"))
	in.Close()
	if err := p.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	// The lines before READY go to out too; READY itself does not.
	if got, want := out.String(), "before\nafter 1\ngot ping\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

// TestStartReadyExitBeforeReady: a helper that exits without READY fails
// the (inner) test instead of hanging.
func TestStartReadyExitBeforeReady(t *testing.T) {
	if os.Getenv("TESTUTIL_HELPER") == "2" {
		os.Stdout.WriteString("no ready here\n")
		os.Exit(0)
	}
	if os.Getenv("TESTUTIL_OUTER") == "1" {
		exe, _ := os.Executable()
		cmd := exec.Command(exe, "-test.run=^TestStartReadyExitBeforeReady$")
		cmd.Env = append(os.Environ(), "TESTUTIL_HELPER=2")
		StartReady(t, cmd, nil, "quitter")
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestStartReadyExitBeforeReady$", "-test.v")
	cmd.Env = append(os.Environ(), "TESTUTIL_OUTER=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "quitter exited before READY") {
		t.Fatalf("inner test: err %v, output %s", err, out)
	}
}

// TestServe: the server answers on the returned address while the test
// runs, and is shut down by the test's cleanup.
func TestServe(t *testing.T) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hi")
	})}
	var addr string
	t.Run("inner", func(t *testing.T) {
		addr = Serve(t, srv)
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "hi" || !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Errorf("%s answered %q", addr, b)
		}
	})
	if _, err := http.Get("http://" + addr + "/"); err == nil {
		t.Errorf("%s still answers after the test that served it ended", addr)
	}
}

// TestWaitOrKill: a process that ignores its stop request is killed after
// the grace period; one that exits is just waited for.
func TestWaitOrKill(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep command")
	}
	stubborn := exec.Command("sleep", "60")
	if err := stubborn.Start(); err != nil {
		t.Fatal(err)
	}
	WaitOrKill(stubborn, 100*time.Millisecond)
	if stubborn.ProcessState == nil || stubborn.ProcessState.Success() {
		t.Errorf("sleep 60 after WaitOrKill: %v, want killed", stubborn.ProcessState)
	}
	quick := exec.Command("true")
	if err := quick.Start(); err != nil {
		t.Fatal(err)
	}
	WaitOrKill(quick, time.Minute)
	if quick.ProcessState == nil || !quick.ProcessState.Success() {
		t.Errorf("true after WaitOrKill: %v, want a clean exit", quick.ProcessState)
	}
}

// TestWriteTree builds a tree with nested files and a symlink, and checks
// every file's content and kind and, through WriteTreeAt, the times.
func TestWriteTree(t *testing.T) {
	dir := t.TempDir()
	mod := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	WriteTreeAt(t, dir, map[string]string{
		"a.txt":       "A",
		"d/e/f.html":  "<p>f</p>",
		"d/link.txt":  "->../a.txt",
		"empty/.keep": "",
	}, mod)
	for name, want := range map[string]string{"a.txt": "A", "d/e/f.html": "<p>f</p>", "d/link.txt": "A", "empty/.keep": ""} {
		b, err := os.ReadFile(dir + "/" + name)
		if err != nil || string(b) != want {
			t.Errorf("%s: %q (%v), want %q", name, b, err, want)
		}
	}
	if fi, err := os.Lstat(dir + "/d/link.txt"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("d/link.txt is not a symlink: %v %v", fi, err)
	}
	for _, name := range []string{"a.txt", "d/e/f.html"} {
		if fi, err := os.Stat(dir + "/" + name); err != nil || !fi.ModTime().Equal(mod) {
			t.Errorf("%s: mod time %v (%v), want %v", name, fi.ModTime(), err, mod)
		}
	}
}

// TestTCPPair: bytes written on either end arrive at the other, and both
// ends are loopback TCP sockets of one connection.
func TestTCPPair(t *testing.T) {
	c, s := TCPPair(t)
	if c.LocalAddr().String() != s.RemoteAddr().String() || s.LocalAddr().String() != c.RemoteAddr().String() {
		t.Fatalf("not one connection: %v→%v, %v→%v", c.LocalAddr(), c.RemoteAddr(), s.RemoteAddr(), s.LocalAddr())
	}
	for _, d := range []struct {
		from, to *net.TCPConn
		msg      string
	}{{c, s, "ping"}, {s, c, "pong"}} {
		d.to.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := d.from.Write([]byte(d.msg)); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, len(d.msg))
		if _, err := io.ReadFull(d.to, b); err != nil || string(b) != d.msg {
			t.Fatalf("read %q (%v), want %q", b, err, d.msg)
		}
	}
}

// TestPattern: the first bytes are xorshift32's from seed 2463534242
// (Marsaglia 2003: the first state is 723471715, low byte 0x63), the output
// is the same on every call, and gzip cannot shrink it.
func TestPattern(t *testing.T) {
	a, b := Pattern(4096), Pattern(4096)
	if !bytes.Equal(a, b) {
		t.Fatal("Pattern differs between calls")
	}
	if a[0] != 723471715&0xff {
		t.Errorf("first byte %#x, want %#x", a[0], 723471715&0xff)
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(a)
	w.Close()
	if z.Len() < len(a) {
		t.Errorf("gzip shrank Pattern(4096) to %d bytes", z.Len())
	}
}

// TestHelperCmd runs this binary's TestHelperEntry as a helper through
// HelperCmd and StartReady: the spec reaches HelperMain's function split in
// fields, and a failing one makes the helper exit 1.
func TestHelperCmd(t *testing.T) {
	for _, tc := range []struct {
		spec string
		out  string
		fail bool
	}{
		{"echo a  b", "[a b]\n", false},
		{"fail x", "", true},
	} {
		var out SyncBuf
		p, in := StartReady(t, HelperCmd(t, nil, "TestHelperEntry", "TESTUTIL_ENTRY", tc.spec), &out, "helper")
		in.Close()
		err := p.Wait()
		if got := out.String(); got != tc.out || (err != nil) != tc.fail {
			t.Errorf("%q: output %q, exit %v; want %q, failure %v", tc.spec, got, err, tc.out, tc.fail)
		}
	}
}

// TestHelperEntry is the helper entry of TestHelperCmd, skipped otherwise.
func TestHelperEntry(t *testing.T) {
	HelperMain(t, "TESTUTIL_ENTRY", func(f []string) error {
		fmt.Println("READY")
		if f[0] == "fail" {
			return errors.New("asked to fail")
		}
		fmt.Println(f[1:])
		return nil
	})
}
