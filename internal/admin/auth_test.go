package admin

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"shoal/internal/cluster/control"
)

const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// secured starts the admin API over a two-node cluster with cfg.
func secured(t *testing.T, cfg Config) (*control.Cluster, *httptest.Server) {
	t.Helper()
	cl, err := control.New(&tablePolicy{}, []control.NodeSpec{{URL: "http://127.0.0.1:9001"}, {URL: "http://127.0.0.1:9002"}}, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewConfig(cl, NewMetrics(cl, "table"), cfg))
	t.Cleanup(srv.Close)
	return cl, srv
}

// send makes one request with headers given as name, value pairs ("Host"
// sets the request's Host) and returns the status, body and response.
func send(t *testing.T, method, url, body string, hdr ...string) (int, string, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		req.Body, req.ContentLength = nil, 0
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp
}

func nodeURLs(cl *control.Cluster) []string {
	var out []string
	for _, n := range cl.Nodes() {
		out = append(out, n.URL)
	}
	return out
}

// TestCrossOriginAddNodeRefused replays a cross-site request forgery:
// a web page on another origin POSTs a node with Content-Type text/plain
// (a "simple" request, which a browser sends without a CORS preflight).
// It must be refused whatever the API's configuration, and the node table
// must not change.
func TestCrossOriginAddNodeRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		hdr  []string
	}{
		{"no token configured", Config{}, nil},
		{"token configured", Config{Token: testToken}, nil},
		{"token configured, page knows it", Config{Token: testToken}, []string{"Authorization", "Bearer " + testToken}},
		{"public", Config{Token: testToken, Public: true}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, srv := secured(t, c.cfg)
			before := nodeURLs(cl)
			hdr := append([]string{"Content-Type", "text/plain;charset=UTF-8", "Origin", "http://evil.example"}, c.hdr...)
			code, body, _ := send(t, "POST", srv.URL+"/nodes", `{"url":"http://10.9.9.9:80","weight":100}`, hdr...)
			if code < 400 || code >= 500 {
				t.Errorf("cross-origin text/plain POST /nodes = %d %s, want refused (4xx)", code, body)
			}
			if after := nodeURLs(cl); strings.Join(after, " ") != strings.Join(before, " ") {
				t.Errorf("node table changed: %v → %v", before, after)
			}
		})
	}
}

// TestAdminAuth walks the rules of a loopback admin API with a token, in
// order (later steps see earlier changes): writes need the bearer token
// (401 with WWW-Authenticate otherwise), a JSON body (415), and no
// cross-origin browser marks (403); reads are open unless the Host is a
// name that could have been rebound to 127.0.0.1; a bad node URL is a 400.
func TestAdminAuth(t *testing.T) {
	cl, srv := secured(t, Config{Token: testToken})
	auth := []string{"Authorization", "Bearer " + testToken}
	json := []string{"Content-Type", "application/json"}
	both := append(append([]string{}, auth...), json...)
	with := func(a []string, b ...string) []string { return append(append([]string{}, a...), b...) }
	host := strings.TrimPrefix(srv.URL, "http://")
	steps := []struct {
		name, method, path, body string
		hdr                      []string
		code                     int
		contains                 string
	}{
		{"POST without token", "POST", "/nodes", `{"url":"http://127.0.0.1:9003"}`, json, 401, "bearer token"},
		{"DELETE without token", "DELETE", "/nodes/1", "", nil, 401, "bearer token"},
		{"PUT without token", "PUT", "/nodes/0/weight", `{"weight":0}`, json, 401, "bearer token"},
		{"wrong token", "PUT", "/nodes/0/weight", `{"weight":0}`, with(json, "Authorization", "Bearer "+strings.Repeat("0", 64)), 401, "wrong"},
		{"token prefix", "PUT", "/nodes/0/weight", `{"weight":0}`, with(json, "Authorization", "Bearer "+testToken[:32]), 401, "wrong"},
		{"token as Basic", "PUT", "/nodes/0/weight", `{"weight":0}`, with(json, "Authorization", "Basic "+testToken), 401, "bearer token"},
		{"OPTIONS (preflight) without token", "OPTIONS", "/nodes", "", []string{"Origin", "http://" + host}, 401, ""},
		{"text/plain", "POST", "/nodes", `{"url":"http://127.0.0.1:9003"}`, with(auth, "Content-Type", "text/plain"), 415, "application/json"},
		{"form", "POST", "/nodes", `{"url":"http://127.0.0.1:9003"}`, with(auth, "Content-Type", "application/x-www-form-urlencoded"), 415, "application/json"},
		{"multipart", "PUT", "/nodes/0/weight", `{"weight":0}`, with(auth, "Content-Type", "multipart/form-data; boundary=x"), 415, "application/json"},
		{"no content type", "POST", "/nodes", `{"url":"http://127.0.0.1:9003"}`, auth, 415, "application/json"},
		{"foreign Origin", "POST", "/nodes", `{"url":"http://127.0.0.1:9003"}`, with(both, "Origin", "http://evil.example"), 403, "origin"},
		{"null Origin", "POST", "/nodes", `{"url":"http://127.0.0.1:9003"}`, with(both, "Origin", "null"), 403, "origin"},
		{"other port Origin", "POST", "/nodes", `{"url":"http://127.0.0.1:9003"}`, with(both, "Origin", "http://127.0.0.1:1"), 403, "origin"},
		{"cross-site fetch", "POST", "/nodes", `{"url":"http://127.0.0.1:9003"}`, with(both, "Sec-Fetch-Site", "cross-site"), 403, "Sec-Fetch-Site"},
		{"same-site fetch", "POST", "/nodes", `{"url":"http://127.0.0.1:9003"}`, with(both, "Sec-Fetch-Site", "same-site"), 403, "Sec-Fetch-Site"},
		{"bad node URL: path", "POST", "/nodes", `{"url":"http://127.0.0.1:9003/x"}`, both, 400, "has a path"},
		{"bad node URL: userinfo", "POST", "/nodes", `{"url":"http://u:p@127.0.0.1:9003"}`, both, 400, "userinfo"},
		{"bad node URL: https", "POST", "/nodes", `{"url":"https://127.0.0.1:9003"}`, both, 400, "scheme"},
		{"bad node URL: no port", "POST", "/nodes", `{"url":"http://127.0.0.1"}`, both, 400, "no port"},
		{"bad node URL: query", "POST", "/nodes", `{"url":"http://127.0.0.1:9003?x=1"}`, both, 400, "query"},
		{"add with token", "POST", "/nodes", `{"url":"http://127.0.0.1:9003"}`, with(both, "Origin", "http://"+host, "Sec-Fetch-Site", "same-origin"), 201, `"index": 2`},
		{"weight with token", "PUT", "/nodes/0/weight", `{"weight":0}`, with(json, "Authorization", "bearer  "+testToken), 200, `"weight": 0`},
		{"delete with token", "DELETE", "/nodes/1", "", with(auth, "Sec-Fetch-Site", "none"), 204, ""},
		{"read without token", "GET", "/nodes", "", nil, 200, "127.0.0.1:9003"},
		{"read by localhost name", "GET", "/nodes", "", []string{"Host", "localhost:9090"}, 200, "127.0.0.1:9003"},
		{"read, rebound name", "GET", "/nodes", "", []string{"Host", "evil.example:9090"}, 403, "Host"},
		{"read, rebound name, token", "GET", "/nodes", "", with(auth, "Host", "evil.example:9090"), 200, "127.0.0.1:9003"},
		{"read cross-origin", "GET", "/tables", "", []string{"Origin", "http://evil.example"}, 403, "origin"},
		{"metrics without token", "GET", "/metrics", "", nil, 200, "shoal_admin_refused_total"},
	}
	for _, s := range steps {
		code, body, resp := send(t, s.method, srv.URL+s.path, s.body, s.hdr...)
		if code != s.code || !strings.Contains(body, s.contains) {
			t.Errorf("%s: %s %s = %d %q, want %d containing %q", s.name, s.method, s.path, code, body, s.code, s.contains)
		}
		if wa := resp.Header.Get("WWW-Authenticate"); (code == 401) != strings.HasPrefix(wa, "Bearer") {
			t.Errorf("%s: %d with WWW-Authenticate %q; want a Bearer challenge exactly on 401", s.name, code, wa)
		}
	}
	got := cl.Nodes()
	if len(got) != 2 || got[0].Weight != 0 || got[1].URL != "http://127.0.0.1:9003" {
		t.Errorf("cluster after the calls = %+v", got)
	}
	_, body, _ := send(t, "GET", srv.URL+"/metrics", "")
	for _, want := range []string{
		`shoal_admin_refused_total{reason="no_token"} 5`,
		`shoal_admin_refused_total{reason="bad_token"} 2`,
		`shoal_admin_refused_total{reason="content_type"} 4`,
		`shoal_admin_refused_total{reason="origin"} 4`,
		`shoal_admin_refused_total{reason="fetch_site"} 2`,
		`shoal_admin_refused_total{reason="host"} 1`,
		`shoal_admin_refused_total{reason="read_only"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestReadOnlyWithoutToken: with no token configured the API answers reads
// on loopback and refuses every write, since no request could prove it is
// allowed to change the cluster.
func TestReadOnlyWithoutToken(t *testing.T) {
	cl, srv := secured(t, Config{})
	json := []string{"Content-Type", "application/json"}
	for _, s := range []struct{ method, path, body string }{
		{"POST", "/nodes", `{"url":"http://127.0.0.1:9003"}`},
		{"PUT", "/nodes/0/weight", `{"weight":0}`},
		{"DELETE", "/nodes/1", ""},
	} {
		code, body, _ := send(t, s.method, srv.URL+s.path, s.body, json...)
		if code != 403 || !strings.Contains(body, "--admin-token-file") {
			t.Errorf("%s %s without a configured token = %d %q, want 403 naming --admin-token-file", s.method, s.path, code, body)
		}
	}
	if code, _, _ := send(t, "GET", srv.URL+"/nodes", ""); code != 200 {
		t.Errorf("GET /nodes = %d, want 200", code)
	}
	if n := cl.Nodes(); len(n) != 2 || n[0].Weight != 1 {
		t.Errorf("cluster changed: %+v", n)
	}
}

// TestPublicNeedsTokenForReads: on an address other hosts can reach, every
// endpoint, /metrics included, needs the token; so does a request that
// arrived on a non-loopback local address even if the API was told it is
// loopback-only (a wildcard bind reached from outside).
func TestPublicNeedsTokenForReads(t *testing.T) {
	_, srv := secured(t, Config{Token: testToken, Public: true})
	for _, p := range []string{"/nodes", "/tables", "/metrics", "/stats"} {
		if code, _, _ := send(t, "GET", srv.URL+p, ""); code != 401 {
			t.Errorf("public GET %s without token = %d, want 401", p, code)
		}
	}
	if code, body, _ := send(t, "GET", srv.URL+"/nodes", "", "Authorization", "Bearer "+testToken); code != 200 {
		t.Errorf("public GET /nodes with token = %d %s", code, body)
	}

	cl, err := control.New(&tablePolicy{}, []control.NodeSpec{{URL: "http://127.0.0.1:9001"}}, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := NewConfig(cl, NewMetrics(cl, "table"), Config{Token: testToken})
	for _, c := range []struct {
		local string
		hdr   string
		code  int
	}{
		{"127.0.0.1", "", 200},
		{"::1", "", 200},
		{"10.1.2.3", "", 401},
		{"10.1.2.3", "Bearer " + testToken, 200},
	} {
		req := httptest.NewRequest("GET", "http://"+net.JoinHostPort(c.local, "9090")+"/nodes", nil)
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP(c.local), Port: 9090}))
		if c.hdr != "" {
			req.Header.Set("Authorization", c.hdr)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code {
			t.Errorf("GET /nodes arriving on %s (auth %v) = %d, want %d", c.local, c.hdr != "", rec.Code, c.code)
		}
	}
}

// TestCheckBind: binding the admin API where other hosts can reach it
// without a token refuses to start, naming the address and the fix.
func TestCheckBind(t *testing.T) {
	cases := []struct {
		addr       string
		token      bool
		public, ok bool
	}{
		{"127.0.0.1:9090", false, false, true},
		{"127.0.0.5:0", false, false, true},
		{"localhost:9090", false, false, true},
		{"LocalHost:9090", false, false, true},
		{"[::1]:9090", false, false, true},
		{"0.0.0.0:9090", false, true, false},
		{":9090", false, true, false},
		{"[::]:9090", false, true, false},
		{"10.1.2.3:9090", false, true, false},
		{"[::ffff:127.0.0.1]:9090", false, false, true},
		{"myhost:9090", false, true, false}, // a name may resolve to anything
		{"9090", false, true, false},        // not host:port
		{"0.0.0.0:9090", true, true, true},
		{"10.1.2.3:9090", true, true, true},
		{"127.0.0.1:9090", true, false, true},
	}
	for _, c := range cases {
		public, err := CheckBind(c.addr, c.token)
		if public != c.public || (err == nil) != c.ok {
			t.Errorf("CheckBind(%q, token %v) = %v, %v; want public %v, ok %v", c.addr, c.token, public, err, c.public, c.ok)
			continue
		}
		if err != nil && (!strings.Contains(err.Error(), c.addr) || !strings.Contains(err.Error(), "--admin-token-file")) {
			t.Errorf("CheckBind(%q) error %q: want the address and --admin-token-file in it", c.addr, err)
		}
	}
}

// TestLoadToken: the token file must be private (like ssh's private keys)
// and hold a token long enough to resist guessing.
func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, content string
		mode          os.FileMode
		want          string // token, or "" for refused
		errHas        []string
	}{
		{"private", testToken + "\n", 0o600, testToken, nil},
		{"owner read-only", "  " + testToken + "\r\n", 0o400, testToken, nil},
		{"world readable", testToken + "\n", 0o644, "", []string{"chmod 600", "readable"}},
		{"group readable", testToken + "\n", 0o640, "", []string{"chmod 600"}},
		{"world writable", testToken + "\n", 0o602, "", []string{"chmod 600"}},
		{"empty", "\n", 0o600, "", []string{"empty"}},
		{"short", "hunter2\n", 0o600, "", []string{"at least 32"}},
		{"two words", testToken + " " + testToken, 0o600, "", []string{"character"}},
		{"two lines", testToken + "\n" + testToken, 0o600, "", []string{"character"}},
	}
	for _, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		tok, err := LoadToken(path)
		if c.want != "" {
			if err != nil || tok != c.want {
				t.Errorf("%s: LoadToken = %q, %v; want the token", c.name, tok, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: LoadToken accepted %q", c.name, tok)
			continue
		}
		for _, w := range append(c.errHas, path) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
	if _, err := LoadToken(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := LoadToken(dir); err == nil {
		t.Error("a directory was accepted as a token file")
	}
}

// TestLoadOrCreateToken: `shoal up` makes a 32-byte random token in a 0600
// file once, and reuses it (so a second `up` sharing the folder agrees).
func TestLoadOrCreateToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "admin.token")
	tok, err := LoadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || len(tok) != 64 || strings.Trim(tok, "0123456789abcdef") != "" {
		t.Errorf("token file mode %v, token %q: want 0600 and 64 hex digits (32 random bytes)", fi.Mode().Perm(), tok)
	}
	again, err := LoadOrCreateToken(path)
	if err != nil || again != tok {
		t.Errorf("second LoadOrCreateToken = %q, %v; want the same token", again, err)
	}
	other, _ := LoadOrCreateToken(filepath.Join(t.TempDir(), "admin.token"))
	if other == tok {
		t.Error("two token files got the same token")
	}
	os.Chmod(path, 0o644)
	if _, err := LoadOrCreateToken(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("0644 token file: %v, want refused", err)
	}
}

// TestLoadConfig: what `shoal front` and `shoal up` start the admin API with.
func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	open := filepath.Join(dir, "open")
	os.WriteFile(good, []byte(testToken+"\n"), 0o600)
	os.WriteFile(open, []byte(testToken+"\n"), 0o600)
	os.Chmod(open, 0o644)
	cases := []struct {
		addr, file string
		want       Config
		errHas     string
	}{
		{"127.0.0.1:9090", "", Config{}, ""},
		{"127.0.0.1:9090", good, Config{Token: testToken}, ""},
		{"0.0.0.0:9090", good, Config{Token: testToken, Public: true}, ""},
		{"0.0.0.0:9090", "", Config{}, "--admin-token-file"},
		{"127.0.0.1:9090", open, Config{}, "chmod 600 " + open},
		{"127.0.0.1:9090", filepath.Join(dir, "none"), Config{}, "none"},
	}
	for _, c := range cases {
		got, err := LoadConfig(c.addr, c.file)
		if c.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("LoadConfig(%q, %q) = %+v, %v; want an error with %q", c.addr, c.file, got, err, c.errHas)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("LoadConfig(%q, %q) = %+v, %v; want %+v", c.addr, c.file, got, err, c.want)
		}
	}
}
