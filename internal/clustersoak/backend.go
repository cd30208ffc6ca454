package clustersoak

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// backend serves the soak's HTTP targets on one loopback listener: fleet
// target i is GET /t/i, healthy (200) or not (503) as the soak flips it;
// every churn target is GET /ok (200). It records every probe of a fleet
// target with the replica that sent it, which the User-Agent names (each
// replica runs a copy of probed whose version is its slot, see
// replicaVersion).
type backend struct {
	srv     *http.Server
	port    int
	targets []backendTarget
	strays  atomic.Int64 // probes from a User-Agent that names no slot
}

// backendTarget is one fleet target.
type backendTarget struct {
	healthy atomic.Bool
	mu      sync.Mutex
	probes  []probe
	flips   int // flips of healthy
}

// probe is one request a backend received.
type probe struct {
	at   time.Time
	slot int
}

func startBackend(n int) (*backend, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &backend{port: lis.Addr().(*net.TCPAddr).Port, targets: make([]backendTarget, n)}
	for i := range b.targets {
		b.targets[i].healthy.Store(true)
	}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(lis) }()
	return b, nil
}

func (b *backend) close() { _ = b.srv.Close() }

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ok" {
		w.WriteHeader(http.StatusOK)
		return
	}
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/t/"))
	if err != nil || i < 0 || i >= len(b.targets) {
		http.NotFound(w, r)
		return
	}
	slot, ok := slotOf(r.UserAgent())
	if !ok {
		b.strays.Add(1)
	}
	t := &b.targets[i]
	t.mu.Lock()
	t.probes = append(t.probes, probe{at: time.Now(), slot: slot})
	healthy := t.healthy.Load()
	t.mu.Unlock()
	if healthy {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
}

// flip turns target i's answer over.
func (b *backend) flip(i int) {
	t := &b.targets[i]
	t.mu.Lock()
	defer t.mu.Unlock()
	t.healthy.Store(!t.healthy.Load())
	t.flips++
}

// probesOf returns a copy of target i's probes.
func (b *backend) probesOf(i int) []probe {
	t := &b.targets[i]
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]probe(nil), t.probes...)
}

func (b *backend) flipsOf(i int) int {
	t := &b.targets[i]
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.flips
}

// lastProber is the slot that probed target i last, and when.
func (b *backend) lastProber(i int) (probe, bool) {
	t := &b.targets[i]
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.probes) == 0 {
		return probe{}, false
	}
	return t.probes[len(t.probes)-1], true
}

// versionPrefix starts the version of every replica's binary: the
// User-Agent of its HTTP probes is "probed/" + version.
const versionPrefix = "probed-soak-slot-"

// replicaVersion is the version stamped into the binary of slot.
func replicaVersion(slot int) string { return fmt.Sprintf("%s%02d", versionPrefix, slot) }

// slotOf reads the slot from a probe's User-Agent.
func slotOf(userAgent string) (int, bool) {
	v, ok := strings.CutPrefix(userAgent, "probed/"+versionPrefix)
	if !ok || len(v) != 2 {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}
