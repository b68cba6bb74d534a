package mbpp

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestMsgRoundTrip(t *testing.T) {
	m := Msg{Kind: KindPing, From: 1 << 60, To: 7, Nb: -42, Inc: 3, Reason: "r",
		Entries: []Entry{
			{ID: 9, Inc: 2, Version: 11, Alive: true, HasMeta: true, MetaVer: 1, Name: "pop9", Addr: "10.0.0.9:7946",
				HasServer: true, ServerVer: 11, Server: 0.75, Links: map[ID]Link{7: {RTT: 12300 * time.Microsecond, Ver: 11}}},
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
	m := Msg{Kind: KindPing, From: 1, To: 2, Entries: []Entry{{ID: 3, HasMeta: true, Name: "x", Links: map[ID]Link{4: {}}}}}
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
