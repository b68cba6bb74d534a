package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFrontAdminOff: `--admin off` turns the admin API off for `shoal
// front` as for `shoal up` and `shoal pop` (and admin = "off" in the
// file), instead of being refused as an address other hosts can reach.
func TestFrontAdminOff(t *testing.T) {
	exe := buildShoal(t)
	c := startChild(t, exe, "front", "--nodes", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--admin", "off")
	c.waitLine(t, "serving")
	c.stop(t)

	conf := filepath.Join(t.TempDir(), "front.toml")
	os.WriteFile(conf, []byte("listen = \"127.0.0.1:0\"\nadmin = \"off\"\n\n[[node]]\nurl = \"http://127.0.0.1:1\"\n"), 0o644)
	c = startChild(t, exe, "front", "--config", conf)
	c.waitLine(t, "serving")
	c.stop(t)
}
