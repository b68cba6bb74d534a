package node

import (
	"strconv"
	"strings"
	"testing"
)

// TestSizeIndex: /.shoal/sizes lists every file of the site with its size
// (what the front's policies need on the handoff paths), and no
// directory nor the symlink that leaves the root.
func TestSizeIndex(t *testing.T) {
	root, secret := site(t)
	ts := start(t, root, nil)
	c := ts.dial(t)
	c.send(get("/.shoal/sizes"))
	r := c.read(false)
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	for _, want := range []string{
		"1024 /1k.bin\n",
		strconv.Itoa(len(helloBody)) + " /hello.txt\n",
		"1 /sub/a <b>.txt\n",
		"14 /withindex/index.html\n",
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("index lacks %q:\n%s", want, r.body)
		}
	}
	for _, bad := range []string{" /sub\n", " /withindex\n", "leak.txt", secret} {
		if strings.Contains(r.body, bad) {
			t.Errorf("index has %q:\n%s", bad, r.body)
		}
	}
	if n := strings.Count(r.body, "\n"); n != 7 {
		t.Errorf("%d lines, want 7 (the site's files):\n%s", n, r.body)
	}
}
