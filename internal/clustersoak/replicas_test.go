package clustersoak

import (
	"os"
	"strings"
	"testing"
)

func TestMetricValue(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 87
go_goroutines_other 3
probed_cluster_lease_losses_total 2
x{a="1"} 4
x{a="2"} 5
`
	for name, want := range map[string]float64{"go_goroutines": 87, "probed_cluster_lease_losses_total": 2, "x": 9} {
		if got, err := metricValue(strings.NewReader(text), name); err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := metricValue(strings.NewReader(text), "absent"); err == nil {
		t.Error("an absent metric read")
	}
}

func TestProcRSS(t *testing.T) {
	rss, err := procRSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("procRSS of the test: %d, %v", rss, err)
	}
}

// TestSlotBinary: the copy of a slot names the slot where the original
// named slot 0, everywhere, at the same length.
func TestSlotBinary(t *testing.T) {
	dir := t.TempDir()
	base := dir + "/base"
	content := "head " + replicaVersion(0) + " middle " + replicaVersion(0) + " tail"
	if err := os.WriteFile(base, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	bin, err := slotBinary(base, dir, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.ReplaceAll(content, replicaVersion(0), replicaVersion(7)); string(b) != want || len(b) != len(content) {
		t.Errorf("copy %q, want %q", b, want)
	}
	if err := os.WriteFile(base, []byte("no version"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := slotBinary(base, dir, 7); err == nil {
		t.Error("a binary without the version copied")
	}
}
