package admin_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"shoal/internal/testutil"
	"shoal/internal/tools/loadgen"
	"shoal/internal/tools/site"
	"shoal/internal/up"
)

var screenshotOut = flag.String("dashboard.png", "", "also write the dashboard test's screenshot to this file (docs/dashboard.png)")

// findChromium returns the path of a Chromium the test can drive, or "".
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestDashboardChromium loads the dashboard of a real cluster (up.Start: 3
// nodes, relay, a small generated site) in headless Chromium and checks
// that
//   - the page runs without a script error or a Content-Security-Policy
//     violation, with no token, on the loopback admin address;
//   - under load (internal/tools/loadgen) its figures move: requests/s above 0,
//     the request counter rising, a weight changed through the API shown;
//   - once the load stops, every whole-number figure on the page equals the
//     same figure in GET /stats and GET /dashboard.json;
//   - on a phone-sized screen nothing is wider than the screen.
//
// The page polls every 250 ms here (?every=250) so that the charts fill in
// a short test. It saves a screenshot taken under load (-dashboard.png=FILE
// to keep it).
func TestDashboardChromium(t *testing.T) {
	exe := findChromium()
	if exe == "" {
		t.Skip("chromium is not installed (apt-get install -y chromium; .ci/run installs it): the dashboard's browser test cannot run")
	}
	if testing.Short() {
		t.Skip("starts a cluster and a browser; skipped with -short")
	}

	// A small site and a cluster on free ports.
	siteDir := t.TempDir()
	if _, err := site.Generate(siteDir, site.Config{Files: 80, MaxTotal: 2 << 20}); err != nil {
		t.Fatal(err)
	}
	files, err := site.Manifest(siteDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.URL)
	}
	zipf, err := loadgen.NewZipf(0.9, names, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := up.Start(up.Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", DataDir: t.TempDir(), Site: siteDir, Nodes: 3,
		CacheMB: 8, HealthInterval: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// Chromium, as root in a container: no sandbox, no GPU, nothing
	// fetched from the network on its own, a fresh profile.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
		// Chromium leaves org.chromium.Chromium.* in TMPDIR: give it the test's.
		chromedp.Env("TMPDIR=" + t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true), chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()

	// Every script error, console error or warning, and browser log error
	// (a Content-Security-Policy violation is one) fails the test.
	var mu sync.Mutex
	var pageErrs []string
	console := chromedp.Console(ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			bad := m.Type == chromedp.ConsoleException || m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning
			if bad && !strings.HasSuffix(m.URL, "/favicon.ico") {
				mu.Lock()
				pageErrs = append(pageErrs, fmt.Sprintf("%s (%s %s)", m, m.Source, m.URL))
				mu.Unlock()
			}
		}
	}()
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(c.AdminURL+"/?every=250"),
		chromedp.WaitVisible(`#live[data-state="ok"]`), chromedp.WaitVisible(`#nodes tr[data-node="2"]`)); err != nil {
		t.Fatalf("loading the dashboard: %v", err)
	}
	t.Logf("dashboard live after %v", time.Since(start).Round(time.Millisecond))

	// figures reads every figure the page shows with its data-k key.
	figures := func() map[string]string {
		t.Helper()
		m, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](
			`Object.fromEntries([...document.querySelectorAll('[data-k]')].map(e => [e.dataset.k, e.textContent]))`))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		return m
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.TextContent(sel))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return s
	}
	before, err := wholeNumber(figures()["stats.requests"])
	if err != nil {
		t.Fatalf("requests figure before load: %v", err)
	}

	// Idle for a few polls (the charts' baseline), then 400 requests/s
	// over 4 connections for 5 s; meanwhile the operator sets node 1's
	// weight to 5 (a bare number).
	time.Sleep(1500 * time.Millisecond)
	lg, err := loadgen.New(loadgen.Config{URL: strings.TrimSuffix(c.URL, "/"), Workload: zipf, Connections: 4,
		Rate: 400, Duration: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		r   *loadgen.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := lg.Run(context.Background())
		done <- result{r, err}
	}()
	if code, body := testutil.AdminCall(t, "PUT", c.AdminURL+"/nodes/1/weight", c.AdminToken, "5"); code != 200 {
		t.Fatalf("PUT /nodes/1/weight 5 = %d %s", code, body)
	}
	var underLoad map[string]string
	var rps float64
	for deadline := time.Now().Add(4500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		underLoad = figures()
		rps, _ = strconv.ParseFloat(strings.ReplaceAll(text("#rps"), ",", ""), 64)
	}
	shot := screenshot(t, ctx)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	t.Logf("load: %d requests, %d ok, %.0f/s; page showed %.1f requests/s", res.r.Requests, res.r.OK, res.r.RPS(), rps)
	during, err := wholeNumber(underLoad["stats.requests"])
	if err != nil {
		t.Fatalf("requests figure under load: %v", err)
	}
	if rps <= 0 || during <= before {
		t.Errorf("under load the page shows %v requests/s and %d requests (was %d); want both to move", rps, during, before)
	}
	if w := underLoad["nodes.1.weight"]; w != "5" {
		t.Errorf("node 1's weight on the page = %q after PUT 5, want 5", w)
	}
	if res.r.OK == 0 || res.r.OK != res.r.Requests {
		t.Errorf("load: %d of %d requests ok", res.r.OK, res.r.Requests)
	}

	// Idle again: the page catches up with /stats within a few polls, and
	// every whole-number figure it shows agrees with the API.
	var mismatch []string
	var checked int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		stats := adminJSON(t, c.AdminURL+"/stats")
		snap := adminJSON(t, c.AdminURL+"/dashboard.json")
		page := figures()
		again := adminJSON(t, c.AdminURL+"/stats")
		if fmt.Sprint(stats) != fmt.Sprint(again) {
			continue // still moving
		}
		mismatch, checked = compare(page, map[string]any{"stats": stats, "nodes": snap["nodes"], "decisions": snap["decisions"]})
		if len(mismatch) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(mismatch) > 0 {
		t.Errorf("page figures differ from the API: %s", strings.Join(mismatch, "; "))
	}
	if checked < 20 {
		t.Errorf("only %d figures compared with the API; want the counters, status classes, paths and nodes", checked)
	}
	got := figures()
	for _, k := range []string{"stats.requests", "stats.status.2xx", "stats.paths.relay", "decisions.node", "nodes.0.requests", "nodes.2.weight"} {
		if _, ok := got[k]; !ok {
			t.Errorf("the page shows no %s", k)
		}
	}
	if n, _ := wholeNumber(got["stats.requests"]); n < before+res.r.Requests {
		t.Errorf("page: %d requests after the run, want at least %d + %d", n, before, res.r.Requests)
	}

	// A phone: 390 px wide. The layout must fit without sideways scrolling
	// of the page (the nodes table may scroll inside its box).
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	fits, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= 390`))
	if err != nil {
		t.Fatal(err)
	}
	tileCols, err := chromedp.Run(ctx, chromedp.Evaluate[int](
		`getComputedStyle(document.querySelector('.tiles')).gridTemplateColumns.split(' ').length`))
	if err != nil {
		t.Fatal(err)
	}
	if !fits || tileCols != 2 {
		t.Errorf("on a 390 px screen: fits %v, %d tile columns (want true, 2)", fits, tileCols)
	}

	mu.Lock()
	for _, e := range pageErrs {
		t.Errorf("page: %s", e)
	}
	mu.Unlock()

	out := filepath.Join(t.TempDir(), "dashboard.png")
	if *screenshotOut != "" {
		out = *screenshotOut
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot in %s; whole test %v", out, time.Since(start).Round(time.Millisecond))
}

// screenshot captures the page at 1280 px wide, as PNG.
func screenshot(t *testing.T, ctx context.Context) []byte {
	t.Helper()
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if len(b) < 8 || string(b[1:4]) != "PNG" {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(b))
	}
	return b
}

// compare checks every figure on the page that is a whole number (as the
// page prints counters) against the value at its key in api; it returns
// the differences and how many figures it compared.
func compare(page map[string]string, api map[string]any) (diffs []string, checked int) {
	for k, text := range page {
		n, err := wholeNumber(text)
		if err != nil {
			continue // a rate, a ratio, a size: not a counter
		}
		var v any = api
		for _, part := range strings.Split(k, ".") {
			switch x := v.(type) {
			case map[string]any:
				v = x[part]
			case []any:
				i, err := strconv.Atoi(part)
				if err != nil || i >= len(x) {
					v = nil
					break
				}
				v = x[i]
			default:
				v = nil
			}
		}
		f, ok := v.(float64)
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s = %q on the page, not a number in the API (%v)", k, text, v))
			continue
		}
		checked++
		if uint64(f) != n {
			diffs = append(diffs, fmt.Sprintf("%s = %d on the page, %v in the API", k, n, f))
		}
	}
	return diffs, checked
}

// wholeNumber parses a counter as the page prints it ("12,345").
func wholeNumber(s string) (uint64, error) {
	return strconv.ParseUint(strings.ReplaceAll(s, ",", ""), 10, 64)
}

// adminJSON GETs url without a token, as the dashboard does on loopback.
func adminJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s = %d %v", url, resp.StatusCode, err)
	}
	return m
}
