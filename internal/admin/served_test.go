package admin

import (
	"reflect"
	"strings"
	"testing"

	"shoal/internal/base/cache"
	"shoal/internal/cluster/control"
)

// TestServedBytesReachMetrics: the nodes' cache.Served counters reach
// /metrics per node (every field of cache.Served, so one added there fails
// here by name) and as the cluster's byte hit ratio: node 0 answered 1,000
// bytes, 250 from memory; node 1 3,000, 2,750 from memory; (250 + 2,750) /
// 4,000 = 0.75.
func TestServedBytesReachMetrics(t *testing.T) {
	cl, srv := setup(t)
	cl.SetStatus(0, &control.Status{Served: cache.Served{ObjectBytes: 1000, MemoryBytes: 250}})
	cl.SetStatus(1, &control.Status{Served: cache.Served{ObjectBytes: 3000, MemoryBytes: 2750}})
	_, body := call(t, "GET", srv.URL+"/metrics", "")
	for _, want := range []string{
		`shoal_node_served_bytes_total{from="all",node="0",url="http://127.0.0.1:9001"} 1000`,
		`shoal_node_served_bytes_total{from="memory",node="0",url="http://127.0.0.1:9001"} 250`,
		`shoal_node_served_bytes_total{from="all",node="1",url="http://127.0.0.1:9002"} 3000`,
		`shoal_node_served_bytes_total{from="memory",node="1",url="http://127.0.0.1:9002"} 2750`,
		"shoal_cluster_byte_hit_ratio 0.75",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if n := reflect.TypeFor[cache.Served]().NumField(); n != 2 {
		t.Errorf("cache.Served has %d fields; export the new ones in nodeCollector and list them here", n)
	}
}
