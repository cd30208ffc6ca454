package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoKubernetesDependency checks that the probed server and the Go
// client stay free of k8s.io: the Kubernetes controller lives in its own
// module (kube/), and its dependencies must not reach them.
func TestNoKubernetesDependency(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	root := moduleRoot(t)
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "./cmd/probed", "./client")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var kube []string
	for pkg := range strings.Lines(string(out)) {
		pkg = strings.TrimSpace(pkg)
		if strings.HasPrefix(pkg, "k8s.io/") || strings.HasPrefix(pkg, "github.com/probed/probed/kube") {
			kube = append(kube, pkg)
		}
	}
	if len(kube) > 0 {
		t.Errorf("probed and client depend on %d Kubernetes packages, e.g. %v", len(kube), kube[:min(len(kube), 5)])
	}
}
