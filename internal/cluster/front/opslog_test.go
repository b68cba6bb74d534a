package front

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// TestLogEvents checks the operational log: a node going down and coming
// back is one line each (node 0 goes down on its first failed connect, the
// passive check; node 1 by hand), and the retried request is counted in one
// summary line for the period, not logged on its own.
func TestLogEvents(t *testing.T) {
	be := namedBackend(t, "n0")
	addr, s, cl := startFront(t, Config{}, "http://127.0.0.1:1", be.URL)
	var buf testutil.SyncBuf
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	LogEvents(ctx, cl, s.Stats, log, 50*time.Millisecond)
	c := dialFront(t, addr)
	for range 6 { // the first meets the dead node 0, is retried on node 1
		c.do(get("/x"))
	}
	cl.SetUp(1, false)
	cl.SetUp(1, true)
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(buf.String(), "retried=") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	out := buf.String()
	for _, want := range []string{`msg="node down" node=0`, `msg="node down" node=1`, `msg="node up" node=1`, "retried=1 "} {
		if strings.Count(out, want) != 1 {
			t.Errorf("want %q once in\n%s", want, out)
		}
	}
	if n := bytes.Count([]byte(out), []byte("retried=")); n != 1 {
		t.Errorf("%d summary lines, want 1:\n%s", n, out)
	}
}
