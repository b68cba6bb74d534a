package offheap

import (
	"math/rand/v2"
	"testing"
)

type val struct {
	a uint64
	b uint32
}

// The map against a Go map: random puts, deletes and in-place changes,
// with keys that crowd few slots (few distinct low bits), through growth
// and backward-shift deletion.
func TestAgainstGoMap(t *testing.T) {
	m, err := New[val]()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	want := map[uint64]val{}
	for step := range 30000 {
		key := uint64(rng.IntN(4000))<<24 | uint64(rng.IntN(4))
		r := m.Find(key)
		w, ok := want[key]
		if (r != 0) != ok || (ok && *m.At(r) != w) || (ok && m.Key(r) != key) {
			t.Fatalf("step %d: key %x: ref %d, want %v %+v", step, key, r, ok, w)
		}
		switch rng.IntN(4) {
		case 0:
			if m.DeleteKey(key) != ok {
				t.Fatalf("step %d: DeleteKey(%x) disagrees", step, key)
			}
			delete(want, key)
		case 1:
			if ok {
				m.At(r).b++
				w.b++
				want[key] = w
			}
		default:
			v := val{a: uint64(step), b: uint32(step)}
			if _, err := m.Put(key, v); err != nil {
				t.Fatal(err)
			}
			want[key] = v
		}
	}
	if m.Len() != len(want) {
		t.Fatalf("Len %d, want %d", m.Len(), len(want))
	}
	seen := 0
	m.All(func(_ Ref, k uint64, v *val) bool {
		if want[k] != *v {
			t.Errorf("All: %x = %+v, want %+v", k, *v, want[k])
		}
		seen++
		return true
	})
	if seen != len(want) {
		t.Errorf("All saw %d entries, want %d", seen, len(want))
	}
	// Key 0 is a key like any other.
	if _, err := m.Put(0, val{a: 7}); err != nil {
		t.Fatal(err)
	}
	if v, ok := m.Get(0); !ok || v.a != 7 {
		t.Errorf("key 0: %+v %v", v, ok)
	}
}

// Deleting during All is allowed, and leaves the rest.
func TestDeleteDuringAll(t *testing.T) {
	m, _ := New[uint32]()
	defer m.Close()
	for i := range uint64(1000) {
		m.Put(i*0x9E3779B97F4A7C15, uint32(i))
	}
	m.All(func(r Ref, _ uint64, v *uint32) bool {
		if *v%2 == 0 {
			m.Delete(r)
		}
		return true
	})
	if m.Len() != 500 {
		t.Fatalf("Len %d after deleting the even half", m.Len())
	}
	for i := range uint64(1000) {
		if _, ok := m.Get(i * 0x9E3779B97F4A7C15); ok != (i%2 == 1) {
			t.Fatalf("%d: present %v", i, ok)
		}
	}
}

// Values with pointers are refused.
func TestPointersRefused(t *testing.T) {
	if _, err := New[*int](); err == nil {
		t.Error("a pointer value was accepted")
	}
	if _, err := New[struct {
		a int
		s string
	}](); err == nil {
		t.Error("a struct with a string was accepted")
	}
	if _, err := New[[4]uint16](); err != nil {
		t.Errorf("an array of integers: %v", err)
	}
}
