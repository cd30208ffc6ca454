package procs_test

import (
	"os"
	"testing"

	"github.com/probed/probed/internal/procs"
)

func TestMain(m *testing.M) {
	// TestChildEnds stops a shell with SIGINT (TestRestoreInterrupt's
	// child sees the inherited disposition as it is).
	if os.Getenv(interruptChildEnv) == "" {
		procs.RestoreInterrupt()
	}
	os.Exit(m.Run())
}
