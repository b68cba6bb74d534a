package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestPublishEndpoints: POST /publish needs the token and an absolute
// folder and passes it to the publisher; GET /publish/versions/{v} needs the
// token even from loopback; both answer clearly when publishing is off.
func TestPublishEndpoints(t *testing.T) {
	_, srv := secured(t, Config{Token: testToken})
	h := srv.Config.Handler.(*Server)
	auth := []string{"Authorization", "Bearer " + testToken, "Content-Type", "application/json"}
	if code, body, _ := send(t, "POST", srv.URL+"/publish", `{"dir": "/srv/site"}`, auth...); code != 501 || !strings.Contains(body, "publish_dir") {
		t.Errorf("publish off: %d %s", code, body)
	}
	var got string
	h.SetPublisher(func(_ context.Context, dir string) (any, error) {
		got = dir
		if dir == "/fail" {
			return nil, errors.New("node n1: disk on fire")
		}
		return map[string]int{"version": 3}, nil
	})
	h.SetVersions(func(w io.Writer, v uint64) error {
		if v != 3 {
			return fmt.Errorf("version %d: no such version", v)
		}
		_, err := io.WriteString(w, "TAR")
		return err
	})
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      []string
		code                     int
		want                     string
	}{
		{"publish without token", "POST", "/publish", `{"dir": "/srv/site"}`, []string{"Content-Type", "application/json"}, 401, "bearer token"},
		{"publish relative", "POST", "/publish", `{"dir": "site"}`, auth, 400, "absolute path"},
		{"publish unknown field", "POST", "/publish", `{"folder": "/srv/site"}`, auth, 400, "unknown field"},
		{"publish", "POST", "/publish", `{"dir": "/srv/site"}`, auth, 200, `"version": 3`},
		{"publish fails", "POST", "/publish", `{"dir": "/fail"}`, auth, 409, "disk on fire"},
		{"version without token", "GET", "/publish/versions/3", "", nil, 401, "admin token"},
		{"version", "GET", "/publish/versions/3", "", auth[:2], 200, "TAR"},
		{"missing version", "GET", "/publish/versions/4", "", auth[:2], 404, "no such version"},
		{"bad version", "GET", "/publish/versions/x", "", auth[:2], 400, "positive integer"},
	} {
		code, body, _ := send(t, tc.method, srv.URL+tc.path, tc.body, tc.hdr...)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, code, body, tc.code, tc.want)
		}
	}
	if got != "/fail" {
		t.Errorf("publisher last got %q", got)
	}
}

// TestRebalanceOnMembership: with a rebalancer set, POST /nodes and DELETE
// /nodes/{i} run it (told the added node's index, or -1) before answering
// and carry its report; a failed rebalance is a 500 naming the node, which
// stays added; without a rebalancer the answers are as before.
func TestRebalanceOnMembership(t *testing.T) {
	_, srv := secured(t, Config{Token: testToken})
	h := srv.Config.Handler.(*Server)
	auth := []string{"Authorization", "Bearer " + testToken, "Content-Type", "application/json"}
	var calls []int
	fail := false
	steps := []struct {
		name, method, path, body string
		set, fail                bool
		code                     int
		want                     string
		calls                    []int
	}{
		{"add, no rebalancer", "POST", "/nodes", `{"url": "http://10.0.0.7:80"}`, false, false, 201, `"index": 2`, nil},
		{"remove, no rebalancer", "DELETE", "/nodes/2", "", false, false, 204, "", nil},
		{"add", "POST", "/nodes", `{"url": "http://10.0.0.8:80"}`, true, false, 201, `"moved_bytes": 42`, []int{3}},
		{"remove", "DELETE", "/nodes/3", "", true, false, 200, `"index": 3`, []int{3, -1}},
		{"add, rebalance fails", "POST", "/nodes", `{"url": "http://10.0.0.9:80"}`, true, true, 500, "disk on fire", []int{3, -1, 4}},
	}
	for _, s := range steps {
		if s.set {
			h.SetRebalancer(func(_ context.Context, joined int) (any, error) {
				calls = append(calls, joined)
				if fail {
					return nil, errors.New("disk on fire")
				}
				return map[string]int{"moved_bytes": 42}, nil
			})
		}
		fail = s.fail
		code, body, _ := send(t, s.method, srv.URL+s.path, s.body, auth...)
		if code != s.code || !strings.Contains(body, s.want) || fmt.Sprint(calls) != fmt.Sprint(s.calls) {
			t.Errorf("%s: %d %q, rebalancer calls %v; want %d %q, calls %v", s.name, code, body, calls, s.code, s.want, s.calls)
		}
	}
	if code, body, _ := send(t, "GET", srv.URL+"/nodes", ""); code != 200 || !strings.Contains(body, "10.0.0.9") {
		t.Errorf("the node whose rebalance failed is not listed: %d %s", code, body)
	}
}
