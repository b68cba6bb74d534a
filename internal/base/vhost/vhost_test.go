package vhost

import (
	"strings"
	"testing"
)

func TestSite(t *testing.T) {
	m, err := New(Config{Sites: []string{"a.example", "b.example"}, Aliases: map[string]string{"www.a.example": "a.example"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"a.example":          "a.example",
		"A.Example:8080":     "a.example",
		"a.example.":         "a.example",
		"www.a.example":      "a.example",
		"WWW.A.EXAMPLE:80":   "a.example",
		"b.example":          "b.example",
		"c.example":          Default,
		"":                   Default,
		"[::1]:8080":         Default,
		"a.example.evil.com": Default,
	}
	var buf []byte
	for host, want := range cases {
		var got string
		got, buf = m.Site(buf, []byte(host))
		if got != want {
			t.Errorf("Site(%q) = %q, want %q", host, got, want)
		}
	}
	if got := strings.Join(m.Sites(), " "); got != "_default a.example b.example" {
		t.Errorf("Sites() = %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { _, buf = m.Site(buf, []byte("WWW.A.EXAMPLE:80")) }); n != 0 {
		t.Errorf("Site allocates %v", n)
	}
}

func TestNewErrors(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Sites: []string{"a.example:80"}}, "not a host name"},
		{Config{Sites: []string{"http://a"}}, "not a host name"},
		{Config{Sites: []string{"a"}, Aliases: map[string]string{"w": "b"}}, "not a site"},
		{Config{Sites: []string{"a", "b"}, Aliases: map[string]string{"a": "b"}}, "names both"},
	}
	for _, c := range cases {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
}

func TestAuthority(t *testing.T) {
	cases := map[string]string{
		"http://a.example/x":     "a.example",
		"HTTPS://a.example:8443": "a.example:8443",
		"http://a.example?q":     "a.example",
		"/x":                     "",
		"*":                      "",
	}
	for target, want := range cases {
		if got := string(Authority([]byte(target))); got != want {
			t.Errorf("Authority(%q) = %q, want %q", target, got, want)
		}
	}
}
