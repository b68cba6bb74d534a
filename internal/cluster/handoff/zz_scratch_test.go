//go:build linux

package handoff

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestScratchTag(t *testing.T) {
	rc := startRepairClusterPath(t, 3, 48, "repair", "--policy", os.Getenv("POL"))
	var tds []*exec.Cmd
	for i, ns := range []string{rc.lab.ClientNS(), rc.lab.FrontNS(), rc.lab.NodeNS(0), rc.lab.NodeNS(1), rc.lab.NodeNS(2)} {
		td := Exec(t.Context(), ns, "tcpdump", "-i", "eth0", "-s", "100", "-w", fmt.Sprintf("/tmp/tag%d.pcap", i), "tcp port 80")
		td.Start()
		tds = append(tds, td)
	}
	time.Sleep(500 * time.Millisecond)
	t0 := time.Now()
	r := runFetch(t, rc.lab.ClientNS(), rc.base, os.Getenv("C"), os.Getenv("R"), rc.manPath)
	t.Logf("%v %+v", time.Since(t0), r)
	time.Sleep(200 * time.Millisecond)
	for _, td := range tds {
		td.Process.Signal(syscall.SIGTERM)
		td.Wait()
	}
	for _, ns := range []string{rc.lab.ClientNS(), rc.lab.FrontNS(), rc.lab.NodeNS(0), rc.lab.NodeNS(1), rc.lab.NodeNS(2)} {
		out, _ := Exec(t.Context(), ns, "sh", "-c", "nstat -a | awk '$2>0'").CombinedOutput()
		t.Logf("%s:\n%s", ns, out)
	}
	s := stopTagCluster(t, rc)
	t.Logf("tag: %+v", s)
	for i, n := range rc.nodes {
		t.Logf("node %d: %s", i, n.logText())
	}
}
func lastLines(s string, n int) string {
	if len(s) > 600 {
		return s[len(s)-600:]
	}
	return s
}
