package front

import (
	"strings"
	"testing"
)

// TestInternalPathsNotPublic: the
// node's status report (RSS, goroutines, socket paths) is for the front's
// health checker and the operator, who reach the node's own port; a client
// of the front must get 404 for every /.shoal/ spelling, on every data
// path — relay, hybrid, passfd from the raw accept loop and from the normal
// path, passfd re-dispatch of a returned connection — and a node must not
// answer it on a connection it was handed (a client that kept its
// connection under a content-blind policy talks to the node directly).
func TestInternalPathsNotPublic(t *testing.T) {
	targets := []string{
		"/.shoal/status",
		"/.shoal/status?x=1",
		"/.shoal/status#frag",
		"http://x/.shoal/status",
		"HTTP://x/.shoal/status",
		"/%2eshoal/status",
		"/%2Eshoal%2Fstatus",
		"//.shoal/status",
		"/./.shoal/status",
		"/f0-0.bin/../.shoal/status",
		"/.shoal/",
		"/.shoal",
		"/.shoal/anything",
	}
	for _, c := range []struct {
		name string
		pol  string
		cfg  func() Config
	}{
		{"relay", "wrr", func() Config { return Config{Path: Relay()} }},
		{"hybrid", "lard", func() Config {
			// Every object counts as large: hand off.
			return Config{Path: Relay(), Choose: Hybrid(PassFD(PassFDConfig{})),
				Hybrid: HybridConfig{CPUPercent: -1, ActiveConns: -1, MinSize: 1, Size: func(string) int64 { return 1 << 20 }}}
		}},
		{"passfd raw accept, node keeps", "wrr", func() Config { return Config{Path: PassFD(PassFDConfig{})} }},
		{"passfd raw accept, hand back", "lard", func() Config { return Config{Path: PassFD(PassFDConfig{})} }},
		{"passfd normal path, node keeps", "wrr", func() Config { return Config{Path: PassFD(PassFDConfig{}), noFastAccept: true} }},
		{"passfd normal path, hand back", "lard", func() Config { return Config{Path: PassFD(PassFDConfig{}), noFastAccept: true} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr, _, _, _, urls, _ := passfdCluster(t, c.pol, 2, c.cfg())
			check := func(how, target string, status int, body string) {
				t.Helper()
				if status != 404 || strings.Contains(body, "rss_bytes") || strings.Contains(body, "handoff_socket") {
					t.Errorf("%s %s: status %d, body %.80q; want 404 without the status report", how, target, status, body)
				}
			}
			for _, target := range targets {
				// First request of a fresh connection.
				cl := dialFront(t, addr)
				resp, body := cl.do(get(target))
				check("first request", target, resp.StatusCode, body)
				// Later request of a connection whose first one went to a
				// node (passed: the node may hold the connection now).
				cl = dialFront(t, addr)
				if resp, _ := cl.do(get(urls[0])); resp.StatusCode != 200 {
					t.Fatalf("GET %s: %d", urls[0], resp.StatusCode)
				}
				resp, body = cl.do(get(target))
				check("second request", target, resp.StatusCode, body)
			}
			// Pipelined behind an ordinary request, in one write.
			cl := dialFront(t, addr)
			if _, err := cl.c.Write([]byte(get(urls[1]) + get("/.shoal/status"))); err != nil {
				t.Fatal(err)
			}
			if resp, _ := cl.read("GET"); resp.StatusCode != 200 {
				t.Fatalf("pipelined GET %s: %d", urls[1], resp.StatusCode)
			}
			resp, body := cl.read("GET")
			check("pipelined", "/.shoal/status", resp.StatusCode, body)
		})
	}
}

// TestInternalURL checks the /.shoal/ test by hand on raw paths and
// absolute-form targets.
func TestInternalURL(t *testing.T) {
	for _, c := range []struct {
		u    string
		want bool
	}{
		{"/.shoal/status", true},
		{"/.shoal", true},
		{"/.shoal/", true},
		{"/%2eshoal/status", true},
		{"/%2Eshoal%2fstatus", true},
		{"/.%73hoal/status", true},
		{"//.shoal/status", true},
		{"/a/../.shoal/status", true},
		{"http://h/.shoal/status", true},
		{"HTTPS://h:80/.shoal/x", true},
		{"/", false},
		{"/index.html", false},
		{"/shoal/status", false},
		{"/.shoalx", false},
		{"/a/.shoal/status", false},
		{"/..%2f.shoal/status", false}, // climbs above the root: the node answers 403
		{"/%zz.shoal", false},          // bad escape: the node answers 400
		{"http://h", false},
		{"h:443", false},
		{"*", false},
	} {
		if got := internalURL(c.u); got != c.want {
			t.Errorf("internalURL(%q) = %v, want %v", c.u, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { internalURL("/img/a/b/c.png") }); n != 0 {
		t.Errorf("internalURL allocates %v times on an ordinary path", n)
	}
}
