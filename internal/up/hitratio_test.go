package up

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/tools/loadgen"
)

const nasa = "../../../shared/data/traces/nasa_aug95_19950801_fullday_derived.log.gz"

// TestLARDBeatsWRRHitRatio checks that locality pays live: the same cluster
// (4 nodes, 2 MiB cache each) serving a site written from the NASA trace,
// replayed in log order once with lard and once with wrr; the aggregate hit
// ratio read from the front's /metrics must be higher for lard, because lard
// sends each URL to one node and so the four small caches add up.
func TestLARDBeatsWRRHitRatio(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the NASA trace twice; skipped with -short")
	}
	if _, err := os.Stat(nasa); err != nil {
		t.Skipf("NASA trace not found at %s (shared/ beside the checkout): %v", nasa, err)
	}
	urls, err := loadgen.LoadTrace(nasa, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	ratio := map[string]float64{}
	for _, pol := range []string{"lard", "wrr"} {
		c, err := Start(Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", DataDir: dataDir, Nodes: 4,
			CacheMB: 2, Policy: pol, SiteFromTrace: nasa, HealthInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		r, err := loadgen.New(loadgen.Config{URL: strings.TrimSuffix(c.URL, "/"), Workload: urls, Connections: 8})
		if err != nil {
			c.Close()
			t.Fatal(err)
		}
		res, err := r.Run(context.Background())
		if err != nil {
			c.Close()
			t.Fatal(err)
		}
		if res.Requests < uint64(len(urls))*9/10 {
			t.Errorf("%s: %d of %d requests answered", pol, res.Requests, len(urls))
		}
		// Wait until the health checker has fetched status reports that
		// include the whole replay, then read the aggregate from /metrics.
		deadline := time.Now().Add(10 * time.Second)
		for {
			var served int64
			for _, n := range c.Control.Nodes() {
				if n.Status != nil {
					served += n.Status.Requests
				}
			}
			if served >= int64(res.Requests) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		ratio[pol] = scrape(t, c.AdminURL+"/metrics", "shoal_cluster_cache_hit_ratio")
		if relayed := scrape(t, c.AdminURL+"/metrics", `shoal_front_path_requests_total{path="relay"}`); relayed < float64(res.Requests) {
			t.Errorf("%s: /metrics counts %v relayed requests, the client got %d answers", pol, relayed, res.Requests)
		}
		t.Logf("%s: %d requests (%d ok) in %v, aggregate hit ratio %.4f", pol, res.Requests, res.OK, res.Duration.Round(time.Millisecond), ratio[pol])
		c.Close()
	}
	if !(ratio["lard"] > ratio["wrr"]) {
		t.Errorf("aggregate hit ratio lard %.4f is not above wrr %.4f", ratio["lard"], ratio["wrr"])
	}
}

// scrape returns the value of an unlabelled metric from a Prometheus text page.
func scrape(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("%s not in %s", name, url)
	return 0
}
