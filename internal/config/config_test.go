package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"shoal/internal/cluster/policy"
)

func TestTemplateIsDefaults(t *testing.T) {
	tmpl, err := FrontTemplate()
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseFront("template.toml", []byte(tmpl))
	if err != nil {
		t.Fatalf("template does not parse: %v", err)
	}
	d := DefaultFront()
	if f.Listen != d.Listen || f.Policy != d.Policy || f.Path != d.Path || f.Health != d.Health || f.Limits != d.Limits ||
		f.AdminTokenFile != d.AdminTokenFile {
		t.Errorf("template and defaults differ:\n%+v\n%+v", f, d)
	}
	if !strings.Contains(tmpl, "\npolicy = \"wrr\"                 # "+strings.Join(policy.Names(), " ")+"\n") {
		t.Errorf("template's policy line does not list policy.Names():\n%s", tmpl)
	}
	if f.Admin != d.Admin || len(f.Nodes) != 2 || *f.Nodes[0].Weight != 1 || f.Nodes[1].Weight != nil {
		t.Errorf("template nodes/admin = %q %+v", f.Admin, f.Nodes)
	}
	p := f.Tuning.Config()
	if p.TLow != 25 || p.THigh != 65 || p.K != 20*time.Second || p.CacheBytes != 32<<20 || p.NoCacheAbove != 0 || p.Epsilon != 0.25 {
		t.Errorf("tuning → policy config = %+v", p)
	}
	if d := policy.DefaultConfig(); p.MaxURLs != d.MaxURLs || p.MaxURLBytes != d.MaxURLBytes {
		t.Errorf("template URL bounds %d URLs, %d bytes; policy defaults %d, %d", p.MaxURLs, p.MaxURLBytes, d.MaxURLs, d.MaxURLBytes)
	}
	// Every knob the [tuning] table writes is the policies' own default, so
	// a file copied from --print-config behaves as no file at all (the
	// knobs [tuning] has no key for are taken from the defaults).
	pd := policy.DefaultConfig()
	pd.NewReplacer = nil
	p.MaxWeightScale, p.ConnTimeout, p.FirstMember = pd.MaxWeightScale, pd.ConnTimeout, pd.FirstMember
	if !reflect.DeepEqual(p, pd) {
		t.Errorf("template's [tuning] gives\n%+v\npolicy defaults are\n%+v", p, pd)
	}
}

func TestErrorsNameFileLineAndFix(t *testing.T) {
	cases := []struct {
		name, file string
		want       []string // substrings of the error, in order
	}{
		{"unknown policy", "listen = \"127.0.0.1:1\"\npolicy = \"lardd\"\n",
			[]string{"f.toml:2:", `policy "lardd" is unknown`, "fix: use one of", "lard"}},
		{"unknown key", "[limits]\nmax_connz = 3\n",
			[]string{"f.toml:2:", `unknown key "limits.max_connz"`, "fix: remove it or correct its spelling"}},
		{"bad duration", "[health]\ninterval = \"soon\"\n",
			[]string{"f.toml:2", "not a duration", "fix:"}},
		{"type error", "[health]\nrise = \"two\"\n",
			[]string{"f.toml:2", "fix: check the TOML syntax"}},
		{"syntax", "policy = \n",
			[]string{"f.toml:1", "fix:"}},
		{"negative weight", "[[node]]\nurl = \"http://a:1\"\n\n[[node]]\nurl = \"http://b:1\"\nweight = -2\n",
			[]string{"f.toml:6:", "node 2: weight -2 is negative", "fix: use 0 to drain"}},
		{"huge weight", "[[node]]\nurl = \"http://a:1\"\nweight = 9223372036854775807\n",
			[]string{"f.toml:3:", "node 1: weight 9223372036854775807 is above the largest, 256", "into 1..256"}},
		{"bad url", "[[node]]\nurl = \"127.0.0.1:9\"\n",
			[]string{"f.toml:2:", `node 1: url "127.0.0.1:9": no scheme`, "fix: write it as http://HOST:PORT"}},
		{"url with a path", "[[node]]\nurl = \"http://127.0.0.1:9001\"\n[[node]]\nurl = \"http://127.0.0.1:9002/x\"\n",
			[]string{"f.toml:2:", `node 2: url "http://127.0.0.1:9002/x": has a path "/x"`, "fix: write it as http://HOST:PORT"}},
		{"url with userinfo", "[[node]]\nurl = \"http://u:p@127.0.0.1:9001\"\n",
			[]string{"f.toml:2:", "userinfo", "fix:"}},
		{"public admin without token", "listen = \"127.0.0.1:1\"\nadmin = \"0.0.0.0:9090\"\n",
			[]string{"f.toml:2:", `admin API address "0.0.0.0:9090" can be reached from other hosts and has no token`,
				"fix: give --admin-token-file FILE (admin_token_file in the config)"}},
		{"all-interfaces admin without token", "admin = \":9090\"\n",
			[]string{"f.toml:1:", `admin API address ":9090"`, "fix:"}},
		{"header limit", "[limits]\nmax_header_bytes = 10\n",
			[]string{"f.toml:2:", "max_header_bytes 10 is out of range"}},
		{"handoff uid", "path = \"passfd\"\nhandoff_uid = -5\n",
			[]string{"f.toml:2:", "handoff_uid -5 is not a user id", "fix:"}},
		{"relative handoff dir", "handoff_dir = \"run/shoal\"\n",
			[]string{"f.toml:1:", `handoff_dir "run/shoal" is not an absolute path`, "fix:"}},
		{"tls without key", "listen = \"127.0.0.1:1\"\n\n[[tls]]\ncert = \"a.crt\"\n",
			[]string{"f.toml:4:", `tls 1: cert "a.crt", key "": both are needed`, "fix: give each [[tls]] table"}},
		{"bad tuning", "[tuning]\nt_low = 90\nt_high = 10\n",
			[]string{"f.toml:1:", "T_low 90, T_high 10", "fix: correct the [tuning] value"}},
		{"bad tuning duration", "[tuning]\nt_low = 5\nk = \"soon\"\n",
			[]string{"f.toml:3:", `invalid duration: "soon"`, "fix: check the TOML syntax"}},
		{"negative URL bound", "[tuning]\nmax_urls = -1\n",
			[]string{"f.toml:1:", "max urls -1", "fix: correct the [tuning] value"}},
		{"negative URL bytes", "[tuning]\nmax_url_mb = -1\n",
			[]string{"f.toml:1:", "max url bytes", "fix: correct the [tuning] value"}},
		{"unknown node cache", "[tuning]\nnode_cache = \"arc\"\n",
			[]string{"f.toml:1:", `node cache "arc"`, "fix: correct the [tuning] value"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseFront("f.toml", []byte(c.file))
			if err == nil {
				t.Fatal("accepted")
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *config.Error: %v", err, err)
			}
			msg := err.Error()
			at := 0
			for _, w := range c.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error %q lacks %q (in order)", msg, w)
				}
				at += i + len(w)
			}
		})
	}
}

func TestValidateFlags(t *testing.T) {
	f := Front{Policy: "nope"}
	err := f.Validate()
	if err == nil || !strings.HasPrefix(err.Error(), "flags: policy \"nope\"") {
		t.Fatalf("Validate = %v", err)
	}
	g := Front{}
	if err := g.Validate(); err != nil || g.Listen != "127.0.0.1:8080" {
		t.Fatalf("zero config should validate to defaults: %v %+v", err, g)
	}
}

// TestAdminBind: the admin address and token file together decide whether
// the front may start: a loopback admin needs no token, any
// other needs admin_token_file.
func TestAdminBind(t *testing.T) {
	cases := []struct {
		file string
		ok   bool
	}{
		{"admin = \"127.0.0.1:9090\"\n", true},
		{"admin = \"localhost:9090\"\n", true},
		{"admin = \"[::1]:9090\"\n", true},
		{"admin = \"\"\n", true},
		{"admin = \"0.0.0.0:9090\"\n", false},
		{"admin = \"192.0.2.1:9090\"\n", false},
		{"admin = \"0.0.0.0:9090\"\nadmin_token_file = \"/etc/shoal/admin.token\"\n", true},
	}
	for _, c := range cases {
		f, err := ParseFront("f.toml", []byte(c.file))
		if (err == nil) != c.ok {
			t.Errorf("%q: err = %v, want ok %v", c.file, err, c.ok)
		}
		if c.ok && strings.Contains(c.file, "admin_token_file") && f.AdminTokenFile != "/etc/shoal/admin.token" {
			t.Errorf("%q: AdminTokenFile = %q", c.file, f.AdminTokenFile)
		}
	}
}

// TestNodeTemplateIsDefaults: `shoal node --print-config` parses back to
// the defaults (plus its sample root), and a node file's problems name the
// line and the fix.
func TestNodeTemplateIsDefaults(t *testing.T) {
	n, err := ParseNode("node.toml", []byte(NodeTemplate))
	if err != nil {
		t.Fatalf("template does not parse: %v", err)
	}
	d := DefaultNode()
	d.Root = "/srv/www"
	if len(n.TrustedFronts) == 0 {
		n.TrustedFronts = nil // the template's [] decodes as an empty list
	}
	if len(n.Aliases) == 0 {
		n.Aliases = nil // and its empty [aliases] table as an empty map
	}
	if len(n.Origins) == 0 {
		n.Origins = nil // [origins] too
	}
	if len(n.Peer.Peers) == 0 {
		n.Peer.Peers = nil
	}
	if !reflect.DeepEqual(n, d) {
		t.Errorf("template and defaults differ:\n%+v\n%+v", n, d)
	}
	for _, c := range []struct{ file, want string }{
		{"listen = 3\n", "node.toml:1"},
		{"root = \"/s\"\ncache = \"arc\"\n", "node.toml:2: cache \"arc\" is unknown; fix: use one of lru, gdsf, cgdsf"},
		{"root = \"/s\"\n[repair]\nport = 1\n", "node.toml:3: unknown key \"repair.port\""},
		{"root = \"/s\"\ncache_mb = -1\n", "node.toml:2: cache_mb -1"},
	} {
		if _, err := ParseNode("node.toml", []byte(c.file)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.file, err, c.want)
		}
	}
}

// TestFrontHybridRepairKeys: the [hybrid] and [repair] tables default as
// their flags do and refuse nonsense.
func TestFrontHybridRepairKeys(t *testing.T) {
	d := DefaultFront()
	if d.Hybrid != (Hybrid{CPUPercent: 30, Conns: 130, SizeKB: 100}) || d.Repair != (Repair{Port: 7070, Steer: "auto", Moves: "nodes", Accept: "front"}) {
		t.Errorf("defaults: hybrid %+v, repair %+v", d.Hybrid, d.Repair)
	}
	f, err := ParseFront("f.toml", []byte("[hybrid]\ncpu_percent = -1\nsite = \"/srv\"\n[repair]\nkey_file = \"/k\"\nsteer = \"bpf\"\n"))
	if err != nil || f.Hybrid.CPUPercent != -1 || f.Hybrid.Site != "/srv" || f.Repair.KeyFile != "/k" || f.Repair.Steer != "bpf" || f.Repair.Port != 7070 {
		t.Errorf("parsed %+v %+v, %v", f.Hybrid, f.Repair, err)
	}
	for _, c := range []struct{ file, want string }{
		{"[repair]\nsteer = \"xdp\"\n", "f.toml:2: repair steer \"xdp\" is unknown"},
		{"[repair]\nport = 70000\n", "f.toml:2: repair port 70000 is out of range"},
	} {
		if _, err := ParseFront("f.toml", []byte(c.file)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.file, err, c.want)
		}
	}
}

func TestVHostKeys(t *testing.T) {
	f, err := ParseFront("vh.toml", []byte("vhosts = [\"a.example\", \"b.example\"]\n[vhost_aliases]\n\"www.a.example\" = \"a.example\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.VHosts) != 2 || f.VHosts[1] != "b.example" || f.VHostAliases["www.a.example"] != "a.example" {
		t.Fatalf("vhosts %v aliases %v", f.VHosts, f.VHostAliases)
	}
}
