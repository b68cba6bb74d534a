package node

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/trace"
)

// TestAccessLogClientAddress checks whose address the access log names: the
// X-Forwarded-For entry a trusted front appended, and the peer otherwise —
// a client that is not a trusted front cannot choose its logged address.
// Health checks are left out unless LogHealth asks for them.
func TestAccessLogClientAddress(t *testing.T) {
	loop := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	other := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		health  bool
		extra   string
		want    []string // hosts of the logged lines, in order
	}{
		{"trusted front", loop, false, "X-Forwarded-For: 203.0.113.7\r\n", []string{"203.0.113.7"}},
		{"trusted, chain: last entry", loop, false, "X-Forwarded-For: 1.2.3.4, 198.51.100.2\r\n", []string{"198.51.100.2"}},
		{"trusted, two headers: last one", loop, false, "X-Forwarded-For: 1.2.3.4\r\nX-Forwarded-For: 2001:db8::1\r\n", []string{"2001:db8::1"}},
		{"trusted, not an address", loop, false, "X-Forwarded-For: evil\" 200 1\r\n", []string{"127.0.0.1"}},
		{"trusted, no header", loop, false, "", []string{"127.0.0.1"}},
		{"untrusted peer", other, false, "X-Forwarded-For: 203.0.113.7\r\n", []string{"127.0.0.1"}},
		{"no trusted fronts", nil, false, "X-Forwarded-For: 203.0.113.7\r\n", []string{"127.0.0.1"}},
		{"health logged when asked", loop, true, "X-Forwarded-For: 203.0.113.7\r\n", []string{"203.0.113.7", "127.0.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, _ := site(t)
			ts := start(t, root, func(c *Config) { c.TrustedFronts, c.LogHealth = tc.trusted, tc.health })
			c := ts.dial(t)
			c.send(get("/hello.txt", tc.extra))
			c.read(false)
			c.send(get("/.shoal/status"))
			c.read(false)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ts.srv.Shutdown(ctx)
			rd := trace.NewReader(strings.NewReader(ts.log.String()), trace.CLF)
			var hosts []string
			for {
				r, err := rd.Next()
				if err != nil {
					break
				}
				hosts = append(hosts, r.Host)
			}
			if strings.Join(hosts, " ") != strings.Join(tc.want, " ") || rd.Malformed() != 0 {
				t.Fatalf("logged hosts %q (%d malformed), want %q\n%s", hosts, rd.Malformed(), tc.want, ts.log.String())
			}
		})
	}
}
