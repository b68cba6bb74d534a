package procstat

import (
	"runtime"
	"testing"
	"time"
)

// CPU must advance while the process computes: spin until it does, or
// fail after far more work than a clock tick of accounting needs.
func TestCPUAdvances(t *testing.T) {
	c0 := CPU()
	if c0 <= 0 {
		t.Fatalf("CPU() = %v at start; a running test has used some", c0)
	}
	x := uint64(1)
	deadline := time.Now().Add(5 * time.Second)
	for CPU() <= c0 {
		for i := 0; i < 1_000_000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU() stayed at %v over 5 s of computing (x=%d)", c0, x)
		}
	}
}

// RSS must count the pages of a large buffer the test touches.
func TestRSSCountsTouchedMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RSS reads /proc/self/statm, which only Linux has")
	}
	r0 := RSS()
	if r0 <= 0 {
		t.Fatalf("RSS() = %d; a running process has resident pages", r0)
	}
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	if r1 := RSS(); r1 < r0+32<<20 {
		t.Errorf("RSS %d after touching 64 MiB, %d before; want at least 32 MiB more", r1, r0)
	}
	runtime.KeepAlive(buf)
}
