package handoff

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the shoal binary the end-to-end tests build once per run
// (repairBinary), so that a test run leaves nothing behind in the temporary
// folder.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildOnce.path != "" {
		os.RemoveAll(filepath.Dir(buildOnce.path))
	}
	os.Exit(code)
}
