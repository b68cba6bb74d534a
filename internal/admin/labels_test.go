package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/policy"
	"shoal/internal/testutil"
)

// shoalSeries counts the shoal_* series in m's registry and fails if any
// label value holds a request URL (one starting with /scan).
func shoalSeries(t *testing.T, m *Metrics) int {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "shoal_") {
			continue
		}
		for _, mt := range mf.GetMetric() {
			n++
			for _, l := range mt.GetLabel() {
				if strings.Contains(l.GetValue(), "/scan") {
					t.Errorf("%s{%s=%q}: a request URL became a label", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
	return n
}

// TestMetricsLabelsIgnoreURLs: the metrics' label values come from the node
// table, the data path and the status class, never from the request, so a
// URL scan through a live front adds no series (every
// table bounded; a label set is a table in the metrics registry).
func TestMetricsLabelsIgnoreURLs(t *testing.T) {
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }))
	t.Cleanup(node.Close)
	p, err := policy.New("lard", policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := control.New(p, []control.NodeSpec{{URL: node.URL}}, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(cl, "lard")
	s, err := front.New(cl, front.Config{Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	m.WatchFront(s.Stats)
	addr := testutil.Serve(t, s)
	client := &http.Client{Timeout: 10 * time.Second}
	scan := func(from, to int) {
		for i := from; i < to; i++ {
			resp, err := client.Get("http://" + addr + "/scan/" + strconv.Itoa(i))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 404 {
				t.Fatalf("scan %d: status %d", i, resp.StatusCode)
			}
		}
	}
	scan(0, 10)
	before := shoalSeries(t, m)
	scan(10, 500)
	if after := shoalSeries(t, m); after != before {
		t.Errorf("%d shoal_* series after 10 URLs, %d after 500: the label set grows with URLs", before, after)
	}
}
