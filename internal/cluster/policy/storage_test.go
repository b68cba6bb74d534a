package policy

import (
	"slices"
	"testing"

	"shoal/internal/cluster/placement"
)

// The holders below are the hand-checked ones of internal/cluster/placement's
// tests (n0, n1 weight 1, n2 weight 2): with R = 1, /index.html lives on
// node 0, /a/b.css and /img/1.png on node 2.
func storageCluster() *Cluster {
	c := newCluster(1, 1, 1)
	c.Storage = &Storage{Nodes: []placement.Node{{ID: "n0", Weight: 1}, {ID: "n1", Weight: 1}, {ID: "n2", Weight: 2}}, Replicas: 1}
	return c
}

var storageHolders = []struct {
	url    string
	holder int
}{{"/index.html", 0}, {"/a/b.css", 2}, {"/img/1.png", 2}}

// TestPoliciesPreferHolders: on an idle cluster whose files are
// partitioned, lard and lardr send a new URL to the node that stores it
// (not the lowest index), weblins makes that node the owner, and tbccrd's
// disk_hit flags are exactly the holders, so it tags the holder.
func TestPoliciesPreferHolders(t *testing.T) {
	for _, tc := range storageHolders {
		for _, name := range []string{"lard", "lardr", "weblins", "tbccrd"} {
			c := storageCluster()
			p := mustNew(t, name, DefaultConfig())
			d := p.Pick(c, &Request{URL: tc.url, Size: 1000, Holder: -1, Conn: 7})
			switch name {
			case "lard", "lardr":
				if d.Node != tc.holder {
					t.Errorf("%s %s: node %d, want the holder %d", name, tc.url, d.Node, tc.holder)
				}
			case "weblins":
				if o := p.(*Weblins).Owner(tc.url); o != tc.holder {
					t.Errorf("weblins %s: owner %d, want the holder %d", tc.url, o, tc.holder)
				}
			case "tbccrd":
				rows := p.(*TBCCRD).Tables(10).(TBCCRDTables).Rows
				if len(rows) != 1 || !slices.Equal(rows[0].Disk, []int{tc.holder}) {
					t.Errorf("tbccrd %s: rows %+v, want disk = [%d]", tc.url, rows, tc.holder)
				}
				if d.Node != tc.holder {
					t.Errorf("tbccrd %s: node %d, want the disk holder %d", tc.url, d.Node, tc.holder)
				}
			}
		}
	}
}

// TestHolderFallback: a holder that is down, or busy beyond LARD's
// thresholds, gives way to the least loaded node (which fetches the file).
func TestHolderFallback(t *testing.T) {
	c := storageCluster()
	c.Nodes[2].Up = false
	if d := mustNew(t, "lard", DefaultConfig()).Pick(c, &Request{URL: "/a/b.css", Size: 1, Holder: -1}); d.Node != 0 {
		t.Errorf("holder down: node %d, want 0 (least active)", d.Node)
	}
	c = storageCluster()
	setActive(c, 0, 0, 1000)
	if d := mustNew(t, "lardr", DefaultConfig()).Pick(c, &Request{URL: "/a/b.css", Size: 1, Holder: -1}); d.Node != 0 {
		t.Errorf("holder overloaded: node %d, want 0", d.Node)
	}
	// Without Storage every node stores everything: lowest index wins.
	c = newCluster(1, 1, 1)
	if d := mustNew(t, "lard", DefaultConfig()).Pick(c, &Request{URL: "/a/b.css", Size: 1, Holder: -1}); d.Node != 0 {
		t.Errorf("no storage: node %d, want 0", d.Node)
	}
	if !c.Stores(2, "/a/b.css") || !slices.Equal(c.Holders(nil, "/x"), []int{0, 1, 2}) {
		t.Error("without Storage every node must store every file")
	}
}

// TestStorageChange: when the placement changes (n2 leaves: weight 0),
// tbccrd's disk flags and weblins' owner follow the new holder. Without n2,
// /a/b.css scores 1.2259 on n0 and 3.2413 on n1 (hand-checked in
// internal/cluster/placement), so n1 holds it.
func TestStorageChange(t *testing.T) {
	for _, name := range []string{"tbccrd", "weblins"} {
		c := storageCluster()
		p := mustNew(t, name, DefaultConfig())
		p.Pick(c, &Request{URL: "/a/b.css", Size: 1000, Holder: -1, Conn: 1})
		left := &Storage{Nodes: slices.Clone(c.Storage.Nodes), Replicas: 1}
		left.Nodes[2].Weight = 0
		c.Storage = left
		c.Version++
		p.Pick(c, &Request{URL: "/a/b.css", Size: 1000, Holder: -1, Conn: 2})
		switch name {
		case "tbccrd":
			if rows := p.(*TBCCRD).Tables(10).(TBCCRDTables).Rows; len(rows) != 1 || !slices.Equal(rows[0].Disk, []int{1}) {
				t.Errorf("tbccrd after n2 left: rows %+v, want disk = [1]", rows)
			}
		case "weblins":
			if o := p.(*Weblins).Owner("/a/b.css"); o != 1 {
				t.Errorf("weblins after n2 left: owner %d, want 1", o)
			}
		}
	}
}
