package pod_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/probed/probed/examples/activator/pod"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/refused"
)

// get sends one request to h and returns the status and body.
func get(t *testing.T, h http.Handler, probe string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	if probe != "" {
		req.Header.Set(pod.ProbeHeader, probe)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestProbeAndHello(t *testing.T) {
	t.Parallel()
	p := pod.New(pod.Options{Name: "hello"})
	if code, body := get(t, p, ""); code != http.StatusOK || body != "Hello from hello!\n" {
		t.Errorf("hello before any probe: (%d, %q)", code, body)
	}
	if code, body := get(t, p, "queue"); code != http.StatusOK || body != "queue" {
		t.Errorf("probe: (%d, %q), want (200, %q)", code, body, "queue")
	}
	if code, _ := get(t, p, "activator"); code != http.StatusBadRequest {
		t.Errorf("probe with another value: %d, want 400", code)
	}
	if code, _ := get(t, p, ""); code != http.StatusOK {
		t.Errorf("hello after a probe: %d", code)
	}
	st := p.Stats()
	if st.FirstReady.IsZero() || st.Probes != 1 || st.ReadyProbes != 1 || st.Requests != 2 || st.EarlyRequests != 1 {
		t.Errorf("stats %+v: want first ready set, 1 probe (ready), 2 requests, 1 early", st)
	}
}

// TestFlap runs a pod for real: ready for the first flap period, unready
// for the next.
func TestFlap(t *testing.T) {
	t.Parallel()
	const flap = 300 * time.Millisecond
	addr := refused.Reserve(t).Addr()
	p := pod.New(pod.Options{Addr: addr, Flap: flap})
	done := make(chan error, 1)
	go func() { done <- p.Run(t.Context()) }()
	t.Cleanup(func() { // t.Context is canceled by now
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var first time.Time
	poll.Until(t, "the pod listening", 10*time.Second, func() bool {
		first = p.Stats().Listening
		return !first.IsZero()
	})
	probe := func() int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/healthz", nil)
		req.Header.Set(pod.ProbeHeader, pod.ProbeQueue)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// Sample well inside each half period so scheduling noise cannot
	// move a sample across a boundary. The pod flaps on the real clock (a
	// program with no clock to inject, as make demo runs it) and says
	// nothing when it flips: the sleeps are the schedule being tested.
	for _, c := range []struct {
		at   time.Duration
		want int
	}{{flap / 3, http.StatusOK}, {flap + flap/2, http.StatusServiceUnavailable}, {2*flap + flap/2, http.StatusOK}} {
		time.Sleep(time.Until(first.Add(c.at)))
		if got := probe(); got != c.want {
			t.Errorf("probe at %v: %d, want %d", c.at, got, c.want)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}
