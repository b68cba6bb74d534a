package timeq

import (
	"testing"
	"time"
)

func TestOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var q Queue[string]
	if _, ok := q.Next(); ok {
		t.Fatal("empty queue has a next time")
	}
	// Pushed out of order; b1 and b2 are due at the same instant and must
	// come out in the order pushed.
	q.Push(t0.Add(3*time.Second), "c")
	q.Push(t0.Add(1*time.Second), "b1")
	q.Push(t0, "a")
	q.Push(t0.Add(1*time.Second), "b2")
	q.Push(t0.Add(1*time.Second), "b3")
	if at, ok := q.Next(); !ok || !at.Equal(t0) {
		t.Fatalf("Next = %v %v, want %v", at, ok, t0)
	}
	for _, step := range []struct {
		now  time.Duration
		want []string
	}{
		{0, []string{"a"}},
		{500 * time.Millisecond, nil},
		{2 * time.Second, []string{"b1", "b2", "b3"}},
		{3 * time.Second, []string{"c"}},
		{time.Hour, nil},
	} {
		var got []string
		if due := q.Due(t0.Add(step.now)); due != (len(step.want) > 0) {
			t.Errorf("Due(+%v) = %v, want %v", step.now, due, len(step.want) > 0)
		}
		for {
			v, at, ok := q.PopDue(t0.Add(step.now))
			if !ok {
				break
			}
			if at.After(t0.Add(step.now)) {
				t.Errorf("popped %s due %v after now %v", v, at, step.now)
			}
			got = append(got, v)
		}
		if len(got) != len(step.want) {
			t.Fatalf("at +%v popped %v, want %v", step.now, got, step.want)
		}
		for i := range got {
			if got[i] != step.want[i] {
				t.Errorf("at +%v popped %v, want %v", step.now, got, step.want)
				break
			}
		}
	}
	if q.Len() != 0 {
		t.Errorf("Len = %d after draining", q.Len())
	}
}
