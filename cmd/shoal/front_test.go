package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFrontRefusesUnsafeAdmin: `shoal front` does not start with an admin
// API other hosts can reach and no token, with a token file others can
// read, or with a node URL the admin API would refuse.
// Each case must return an error before serving; one that starts instead
// is reported after a few seconds (and left running until the test ends).
func TestFrontRefusesUnsafeAdmin(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open.token")
	if err := os.WriteFile(open, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o644)
	cfg := filepath.Join(dir, "front.toml")
	os.WriteFile(cfg, []byte("admin = \"0.0.0.0:0\"\n[[node]]\nurl = \"http://127.0.0.1:1\"\n"), 0o644)
	base := []string{"--listen", "127.0.0.1:0", "--health-interval", "0"}
	cases := []struct {
		name   string
		args   []string
		errHas string
	}{
		{"all interfaces, no token", []string{"--nodes", "http://127.0.0.1:1", "--admin", "0.0.0.0:0"}, "--admin-token-file"},
		{"all interfaces from the file, no token", []string{"--config", cfg}, "front.toml:1: admin API address \"0.0.0.0:0\""},
		{"token file mode 0644", []string{"--nodes", "http://127.0.0.1:1", "--admin", "127.0.0.1:0", "--admin-token-file", open}, "chmod 600"},
		{"node URL with a path", []string{"--nodes", "http://127.0.0.1:1/x", "--admin", "127.0.0.1:0"}, "has a path"},
		{"node URL with userinfo", []string{"--nodes", "http://a:b@127.0.0.1:1"}, "userinfo"},
	}
	for _, c := range cases {
		errc := make(chan error, 1)
		go func() { errc <- runFront(append(append([]string{}, base...), c.args...)) }()
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("%s: shoal front %v = %v, want an error with %q", c.name, c.args, err, c.errHas)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: shoal front %v started; want it refused with %q", c.name, c.args, c.errHas)
		}
	}
}
