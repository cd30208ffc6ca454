package clustersoak

import (
	"fmt"
	"net/http"
	"testing"
)

func TestSlotOf(t *testing.T) {
	tests := []struct {
		ua   string
		slot int
		ok   bool
	}{
		{"probed/" + replicaVersion(3), 3, true},
		{"probed/" + replicaVersion(12), 12, true},
		{"probed/v1.2.3", 0, false},
		{"curl/8", 0, false},
		{"probed/" + versionPrefix + "x", 0, false},
	}
	for _, tc := range tests {
		if slot, ok := slotOf(tc.ua); slot != tc.slot || ok != tc.ok {
			t.Errorf("slotOf(%q) = %d, %v; want %d, %v", tc.ua, slot, ok, tc.slot, tc.ok)
		}
	}
}

// TestBackendRecordsProber: the backend answers as the target is flipped
// and records which replica (User-Agent) probed.
func TestBackendRecordsProber(t *testing.T) {
	b, err := startBackend(2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	get := func(path string, slot int) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", b.port, path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("User-Agent", "probed/"+replicaVersion(slot))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if c := get("/t/1", 4); c != http.StatusOK {
		t.Errorf("healthy target: %d", c)
	}
	b.flip(1)
	if c := get("/t/1", 2); c != http.StatusServiceUnavailable {
		t.Errorf("flipped target: %d", c)
	}
	if c := get("/ok", 2); c != http.StatusOK {
		t.Errorf("/ok: %d", c)
	}
	ps := b.probesOf(1)
	if len(ps) != 2 || ps[0].slot != 4 || ps[1].slot != 2 || b.flipsOf(1) != 1 {
		t.Errorf("probes %+v, flips %d; want slots 4 then 2, one flip", ps, b.flipsOf(1))
	}
	if p, ok := b.lastProber(1); !ok || p.slot != 2 {
		t.Errorf("last prober %+v, %v", p, ok)
	}
}
