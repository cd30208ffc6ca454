package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestClusterScriptServesWhatItDocuments: make cluster's replicas serve
// their metrics (the probed_cluster_* families the README names), and the
// example target it suggests probes a port the cluster serves (r1's status
// page), not make run's.
func TestClusterScriptServesWhatItDocuments(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile("../../examples/cluster/cluster.sh")
	if err != nil {
		t.Fatal(err)
	}
	s := string(script)
	if !strings.Contains(s, `--metrics-addr "$metrics"`) || strings.Contains(s, `--metrics-addr ""`) {
		t.Error(`cluster.sh does not give each replica a metrics listener (--metrics-addr "$metrics")`)
	}
	m := regexp.MustCompile(`UI_BASE_PORT=\$\{UI_BASE_PORT:-(\d+)\}`).FindStringSubmatch(s)
	if m == nil {
		t.Fatal("cluster.sh sets no default UI_BASE_PORT")
	}
	base, _ := strconv.Atoi(m[1])
	if !strings.Contains(s, "examples/cluster/targets/page.yaml") {
		t.Error("cluster.sh does not suggest examples/cluster/targets/page.yaml")
	}
	b, err := os.ReadFile("../../examples/cluster/targets/page.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		ReadinessProbe struct {
			TCPSocket struct{ Port int } `json:"tcpSocket"`
		} `json:"readinessProbe"`
	}
	if err := yaml.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	if got, want := spec.ReadinessProbe.TCPSocket.Port, base+1; got != want {
		t.Errorf("examples/cluster/targets/page.yaml probes port %d, want r1's status page %d", got, want)
	}
}
