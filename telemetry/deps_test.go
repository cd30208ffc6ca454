package telemetry_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTelemetryDependsOnNoAdapter: telemetry observes the engine and is
// plugged into the gRPC server by cmd/probed; it imports neither the
// server package nor the generated API (its WatchObserver satisfies
// server.Observer where cmd/probed wires them).
func TestTelemetryDependsOnNoAdapter(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "github.com/probed/probed/server" || strings.HasPrefix(pkg, "github.com/probed/probed/proto/") {
			t.Errorf("telemetry depends on %s", pkg)
		}
	}
}
