package sim

import "testing"

// TestPartitionedStorageByHand: four requests for one 8 KiB file, wrr over
// two nodes, one request in the system. Full copies: each node reads its
// own disk once (2 disk reads, no internal bytes). With Replicas = 1 the
// file lives on n0 only (hand-checked in internal/cluster/placement: score 14.29
// against 2.91): n0 reads its disk once, n1 gets the file from n0 (8 KiB
// inside the cluster, 2 KiB per request) and keeps it; one disk read.
func TestPartitionedStorageByHand(t *testing.T) {
	for _, tc := range []struct {
		replicas      int
		disk          int64
		internalPerRq float64
	}{{0, 2, 0}, {2, 2, 0}, {1, 1, 2048}} {
		res, err := Run(Config{Policy: "wrr", Nodes: 2, PerNode: 1, Replicas: tc.replicas}, NewSliceSource(repeat("/index.html", 8<<10, 4)))
		if err != nil {
			t.Fatal(err)
		}
		if res.DiskReads != tc.disk || res.InternalBytesPerRequest != tc.internalPerRq || res.Requests != 4 {
			t.Errorf("replicas %d: disk reads %d (want %d), internal B/request %v (want %v), requests %d",
				tc.replicas, res.DiskReads, tc.disk, res.InternalBytesPerRequest, tc.internalPerRq, res.Requests)
		}
	}
}

// TestPartitionedStorageLARD: with each file on one of four nodes, lard
// sends each URL to its holder, so it moves far fewer bytes between nodes
// than wrr, which fetches three requests in four from a holder.
func TestPartitionedStorageLARD(t *testing.T) {
	var a []Access
	for i := range 2000 {
		a = append(a, Access{URL: "/f" + string(rune('a'+i%26)) + string(rune('a'+i%37)), Size: 4 << 10})
	}
	internal := map[string]float64{}
	for _, pol := range []string{"wrr", "lard"} {
		res, err := Run(Config{Policy: pol, Nodes: 4, Replicas: 1}, NewSliceSource(a))
		if err != nil {
			t.Fatal(err)
		}
		internal[pol] = res.InternalBytesPerRequest
	}
	if internal["wrr"] == 0 || internal["lard"] > internal["wrr"]/4 {
		t.Errorf("internal bytes per request: wrr %v, lard %v; want lard well below wrr", internal["wrr"], internal["lard"])
	}
	t.Logf("internal B/request with R = 1 of 4: %v", internal)
}
