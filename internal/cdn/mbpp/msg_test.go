package mbpp

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestMsgRoundTrip(t *testing.T) {
	m := Msg{Kind: KindPing, From: 1 << 60, To: 7, Nb: -42, Inc: 3, Reason: "r",
		Entries: []Entry{
			{ID: 9, Inc: 2, Version: 11, Alive: true, HasMeta: true, MetaVer: 1, Name: "pop9", Addr: "10.0.0.9:7946", Gateway: "192.0.2.9,2001:db8::9",
				HasServer: true, ServerVer: 11, Server: 0.75, Links: Links{{Peer: 7, RTT: 12300 * time.Microsecond, Ver: 11}}},
			{ID: 10, Inc: 1, Version: 4},
		},
		Proposals: []Proposal{{ID: 5, Name: "new", Addr: "a:1", Proof: []byte{1, 2}, Origin: 9, Accepts: 3, Rejected: true, Reason: "no"}}}
	b := m.AppendBinary(nil)
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	// Every truncation and a trailing byte is an error, never a panic.
	for i := range b {
		if _, err := Decode(b[:i]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("truncated at %d: err %v", i, err)
		}
	}
	if _, err := Decode(append(b, 0)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("trailing byte accepted: %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	head := func(kind byte) []byte {
		return append([]byte{wireVersion, kind, 0}, make([]byte, 16)...)
	}
	for name, b := range map[string][]byte{
		"version":     append([]byte{9, 1, 0}, make([]byte, 16)...),
		"kind":        append(head(99), 0, 0, 0, 0, 0),
		"huge count":  append(head(1), 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f),
		"long string": append(head(1), 0, 0, 0xff, 0x7f),
	} {
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	m := Msg{Kind: KindPing, From: 1, To: 2, Entries: []Entry{{ID: 3, HasMeta: true, Name: "x", Links: Links{{Peer: 4}}}}}
	f.Add(m.AppendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		if _, err := Decode(m.AppendBinary(nil)); err != nil {
			t.Fatalf("re-encoding of a decoded message fails: %v", err)
		}
	})
}

// TestMergeLinks checks the sorted-slice merge that replaced the per-entry
// map: newer versions replace, older ones are ignored, new peers land in
// order, and the result says whether anything changed.
func TestMergeLinks(t *testing.T) {
	l := func(p ID, rtt time.Duration, v uint64) Link { return Link{Peer: p, RTT: rtt, Ver: v} }
	for _, tc := range []struct {
		name    string
		e, d    Links
		want    Links
		changed bool
	}{
		{"empty into empty", nil, nil, nil, false},
		{"into empty", nil, Links{l(3, 1, 1), l(9, 2, 1)}, Links{l(3, 1, 1), l(9, 2, 1)}, true},
		{"newer replaces", Links{l(3, 1, 1), l(9, 2, 1)}, Links{l(9, 5, 2)}, Links{l(3, 1, 1), l(9, 5, 2)}, true},
		{"older ignored", Links{l(3, 1, 4)}, Links{l(3, 7, 3)}, Links{l(3, 1, 4)}, false},
		{"same version ignored", Links{l(3, 1, 4)}, Links{l(3, 8, 4)}, Links{l(3, 1, 4)}, false},
		{"new peers in order", Links{l(3, 1, 1), l(9, 2, 1)}, Links{l(1, 4, 2), l(5, 5, 2), l(12, 6, 2)},
			Links{l(1, 4, 2), l(3, 1, 1), l(5, 5, 2), l(9, 2, 1), l(12, 6, 2)}, true},
		{"new and newer", Links{l(3, 1, 1), l(9, 2, 1)}, Links{l(3, 7, 2), l(4, 8, 2)},
			Links{l(3, 7, 2), l(4, 8, 2), l(9, 2, 1)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := mergeLinks(slices.Clone(tc.e), tc.d)
			if !slices.Equal(got, tc.want) || changed != tc.changed {
				t.Fatalf("got %v changed %v, want %v changed %v", got, changed, tc.want, tc.changed)
			}
		})
	}
}

// TestDecodeLinksNormalised: links arrive in any order from a peer (and the
// old map encoding sent them in map order); the decoder sorts them and keeps
// the newest of duplicates, so lookups by binary search find them.
func TestDecodeLinksNormalised(t *testing.T) {
	in := Msg{Kind: KindPing, From: 1, To: 2, Entries: []Entry{{ID: 3, Links: Links{
		{Peer: 9, RTT: 900 * time.Microsecond, Ver: 1}, {Peer: 4, RTT: 400 * time.Microsecond, Ver: 1},
		{Peer: 9, RTT: 1200 * time.Microsecond, Ver: 5}, {Peer: 6, RTT: 600 * time.Microsecond, Ver: 2}}}}}
	out, err := Decode(in.AppendBinary(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Links{{Peer: 4, RTT: 400 * time.Microsecond, Ver: 1}, {Peer: 6, RTT: 600 * time.Microsecond, Ver: 2},
		{Peer: 9, RTT: 1200 * time.Microsecond, Ver: 5}}
	if got := out.Entries[0].Links; !slices.Equal(got, want) {
		t.Fatalf("links %v, want %v", got, want)
	}
	if l, ok := out.Entries[0].Links.Get(6); !ok || l.RTT != 600*time.Microsecond {
		t.Fatalf("Get(6) = %v %v", l, ok)
	}
}
