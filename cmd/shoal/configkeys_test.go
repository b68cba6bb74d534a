package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"shoal/internal/config"
)

// TestEveryFlagHasAKey enumerates the flags of `shoal front` and `shoal
// node` from their --help and checks that each has a key in its
// configuration file (once --hybrid-cpu, --hybrid-conns,
// --hybrid-size-kb, --site and the --repair-* flags had none, and nodes
// had no file at all), that the key exists in the file's schema, and that
// --print-config shows it.
func TestEveryFlagHasAKey(t *testing.T) {
	for _, c := range []struct {
		cmd      string
		flagKeys map[string]string
		keys     []string
	}{
		{"front", frontFlagKeys, config.FrontKeys()},
		{"node", nodeFlagKeys, config.NodeKeys()},
	} {
		help, _, code := shoal(t, c.cmd, "--help")
		if code != 0 {
			t.Fatalf("shoal %s --help: exit %d", c.cmd, code)
		}
		tmpl, _, _ := shoal(t, c.cmd, "--print-config")
		var flags []string
		for _, line := range strings.Split(help, "\n") {
			if rest, ok := strings.CutPrefix(line, "  -"); ok {
				name, _, _ := strings.Cut(rest, " ")
				flags = append(flags, name)
			}
		}
		if len(flags) < 5 {
			t.Fatalf("shoal %s --help lists %d flags: %q", c.cmd, len(flags), help)
		}
		for _, f := range flags {
			if metaFlags[f] {
				continue
			}
			key, ok := c.flagKeys[f]
			if !ok {
				t.Errorf("shoal %s --%s has no configuration key", c.cmd, f)
				continue
			}
			if !slices.Contains(c.keys, key) {
				t.Errorf("shoal %s --%s: key %q is not in the file's keys %v", c.cmd, f, key, c.keys)
			}
			last := key[strings.LastIndex(key, ".")+1:]
			// An optional table with no default ([[tls]]) is shown commented;
			// a map ([aliases]) as its table.
			if !strings.Contains(tmpl, "\n"+last+" =") && !strings.Contains(tmpl, "\n# "+last+" =") && !strings.Contains(tmpl, "\n["+key+"]") {
				t.Errorf("shoal %s --print-config does not show %q (for --%s)", c.cmd, key, f)
			}
		}
		for f := range c.flagKeys {
			if !slices.Contains(flags, f) {
				t.Errorf("shoal %s: key table names --%s, which is not a flag", c.cmd, f)
			}
		}
	}
}

// TestConfigFilesReachFlags: a node file's keys and a front file's
// [hybrid]/[repair] keys reach the flags they stand for, unless the flag is
// given (here seen through the errors each value causes).
func TestConfigFilesReachFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	nodeFile := write("node.toml", "root = \""+dir+"/missing\"\nlisten = \"127.0.0.1:0\"\n")
	if err := runNode([]string{"--config", nodeFile}); err == nil || !strings.Contains(err.Error(), dir+"/missing") {
		t.Errorf("node root from the file: %v", err)
	}
	bad := write("bad.toml", "root = \"/srv\"\ncache = \"arc\"\n")
	if err := runNode([]string{"--config", bad}); err == nil || !strings.Contains(err.Error(), "bad.toml:2: cache \"arc\"") {
		t.Errorf("node file error: %v", err)
	}
	// The repair key file comes from [repair]; the flag wins over it.
	frontFile := write("front.toml", "listen = \"10.255.255.1:80\"\npath = \"repair\"\n[[node]]\nurl = \"http://127.0.0.1:1\"\n[repair]\nkey_file = \""+dir+"/nokey\"\n")
	if err := runFront([]string{"--config", frontFile, "--health-interval", "0"}); err == nil || !strings.Contains(err.Error(), dir+"/nokey") {
		t.Errorf("front repair key from the file: %v", err)
	}
	if err := runFront([]string{"--config", frontFile, "--health-interval", "0", "--repair-key-file", dir + "/flagkey"}); err == nil || !strings.Contains(err.Error(), dir+"/flagkey") {
		t.Errorf("front repair key from the flag: %v", err)
	}
}
