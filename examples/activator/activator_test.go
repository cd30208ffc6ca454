package activator_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/probed/probed/client"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/examples/activator/pod"
	"github.com/probed/probed/examples/activator/proxy"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/procs"
	"github.com/probed/probed/internal/refused"
)

func TestMain(m *testing.M) {
	procs.RestoreInterrupt() // TestDemo stops its script with SIGINT, as Ctrl-C does
	goleak.VerifyTestMain(m)
}

// env is a real probed (accepting 50 ms periods, as the activator's probe
// needs), a client of it and an activator proxy in front of backends.
type env struct {
	c     *client.Client
	proxy *proxy.Proxy
	front *httptest.Server
}

func start(t *testing.T, backends []proxy.Backend, opts proxy.Options) *env {
	t.Helper()
	srv := probedtest.Start(t, probedtest.Options{Engine: engine.Options{MinPeriod: 50 * time.Millisecond}})
	c := client.New(srv.Conn)
	if opts.HoldTimeout == 0 {
		opts.HoldTimeout = 20 * time.Second // fail sooner than the default minute
	}
	p, err := proxy.New(c, backends, opts)
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	return &env{c: c, proxy: p, front: front}
}

// get sends GET path to the proxy with Host host and returns the status
// and body.
func (e *env) get(t *testing.T, ctx context.Context, host, path string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.front.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := e.front.Client().Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// runPod runs p until the returned stop is called (also at the test's
// end).
func runPod(t *testing.T, p *pod.Pod) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.Run(ctx); err != nil {
			t.Errorf("pod: %v", err)
		}
	})
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

// TestColdStart is scale from zero: requests arrive before the pod
// listens, are held (sharing one target and one wait), and are answered
// once probed has seen the pod ready, never before.
func TestColdStart(t *testing.T) {
	const (
		requests = 20
		delay    = 500 * time.Millisecond
	)
	addr := refused.Reserve(t).Addr()
	e := start(t, []proxy.Backend{{Name: "hello", Addr: addr}}, proxy.Options{})
	p := pod.New(pod.Options{Addr: addr, Name: "hello", Delay: delay})

	type result struct {
		status int
		body   string
		err    error
		at     time.Time
	}
	results := make([]result, requests)
	sent := time.Now()
	runPod(t, p)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			status, body, err := e.get(t, ctx, "hello", "/")
			results[i] = result{status, body, err, time.Now()}
		})
	}
	wg.Wait()

	st := p.Stats()
	if st.Listening.IsZero() || st.FirstReady.IsZero() {
		t.Fatalf("pod stats %+v: never listened or never answered a probe 200", st)
	}
	if !sent.Before(st.Listening) {
		t.Fatalf("requests sent at %v, not before the pod listened at %v: the test proves nothing", sent, st.Listening)
	}
	var extra, afterProbe []time.Duration
	for i, r := range results {
		if r.err != nil || r.status != http.StatusOK || r.body != "Hello from hello!\n" {
			t.Errorf("request %d: got (%d, %q, %v), want (200, %q, nil)", i, r.status, r.body, r.err, "Hello from hello!\n")
			continue
		}
		if r.at.Before(st.FirstReady) {
			t.Errorf("request %d answered at %v, before the pod's first successful probe at %v", i, r.at, st.FirstReady)
		}
		extra = append(extra, r.at.Sub(st.Listening))
		afterProbe = append(afterProbe, r.at.Sub(st.FirstReady))
	}
	if st.EarlyRequests != 0 || st.Requests != requests {
		t.Errorf("pod got %d requests, %d of them before its first successful probe; want %d, 0", st.Requests, st.EarlyRequests, requests)
	}
	ps := e.proxy.Stats()
	if ps.Registrations != 1 || ps.Waits != 1 || ps.Held != requests {
		t.Errorf("proxy stats %+v: want 1 registration, 1 wait, %d held", ps, requests)
	}
	targets, err := e.c.ListAll(t.Context(), nil)
	if err != nil || len(targets) != 1 {
		t.Errorf("ListAll: %d targets, %v; want 1", len(targets), err)
	}
	slices.Sort(extra)
	slices.Sort(afterProbe)
	if len(extra) > 0 {
		t.Logf("pod listened %v after the requests were sent; %d requests answered, response − pod start: min %v, median %v, max %v; response − first successful probe: median %v, max %v",
			st.Listening.Sub(sent).Round(time.Millisecond), len(extra),
			extra[0].Round(10*time.Microsecond), extra[len(extra)/2].Round(10*time.Microsecond), extra[len(extra)-1].Round(10*time.Microsecond),
			afterProbe[len(afterProbe)/2].Round(10*time.Microsecond), afterProbe[len(afterProbe)-1].Round(10*time.Microsecond))
	}
}

// switchable is a backend whose readiness a test sets; any request that
// is not a probe gets "path=<path>".
type switchable struct {
	srv   *httptest.Server
	ready atomic.Bool
}

func newSwitchable(t *testing.T) *switchable {
	t.Helper()
	s := &switchable{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(pod.ProbeHeader) == pod.ProbeQueue {
			if !s.ready.Load() {
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
			_, _ = io.WriteString(w, pod.ProbeQueue)
			return
		}
		_, _ = fmt.Fprintf(w, "path=%s", r.URL.Path)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *switchable) addr() string { return s.srv.Listener.Addr().String() }

// eventually fails the test unless cond holds within 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 10*time.Second, cond)
}

func TestRouting(t *testing.T) {
	a, b := newSwitchable(t), newSwitchable(t)
	a.ready.Store(true)
	b.ready.Store(true)
	e := start(t, []proxy.Backend{{Name: "a", Addr: a.addr()}, {Name: "b", Addr: b.addr()}}, proxy.Options{})
	tests := []struct {
		name       string
		host, path string
		wantStatus int
		wantBody   string
	}{
		{"host", "a", "/x", http.StatusOK, "path=/x"},
		{"host with port", "b:8080", "/y", http.StatusOK, "path=/y"},
		{"first label of host", "a.example.com", "/", http.StatusOK, "path=/"},
		{"path prefix", "example.com", "/b/z/w", http.StatusOK, "path=/z/w"},
		{"path prefix alone", "example.com", "/a", http.StatusOK, "path=/"},
		{"no backend", "example.com", "/c/z", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, err := e.get(t, t.Context(), tt.host, tt.path)
			if err != nil || status != tt.wantStatus || (tt.wantBody != "" && body != tt.wantBody) {
				t.Errorf("GET %s%s: got (%d, %q, %v), want (%d, %q)", tt.host, tt.path, status, body, err, tt.wantStatus, tt.wantBody)
			}
		})
	}
}

// TestReadinessLost: a backend that was ready and fails its probes is
// held again until it is ready again, on the same target.
func TestReadinessLost(t *testing.T) {
	s := newSwitchable(t)
	s.ready.Store(true)
	e := start(t, []proxy.Backend{{Name: "flappy", Addr: s.addr()}},
		proxy.Options{Period: 100 * time.Millisecond, FailureThreshold: 1})
	if status, _, err := e.get(t, t.Context(), "flappy", "/1"); err != nil || status != http.StatusOK {
		t.Fatalf("first request: %d, %v", status, err)
	}
	s.ready.Store(false)
	eventually(t, "the proxy sees the backend unready", func() bool { return !e.proxy.Ready("flappy") })

	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		status, _, err := e.get(t, t.Context(), "flappy", "/2")
		done <- result{status, err}
	}()
	eventually(t, "the second request is held", func() bool { return e.proxy.Stats().Held == 2 })
	select {
	case r := <-done:
		t.Fatalf("request answered (%d, %v) while the backend is unready", r.status, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	s.ready.Store(true)
	if r := <-done; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("held request: (%d, %v), want 200", r.status, r.err)
	}
	if ps := e.proxy.Stats(); ps.Registrations != 1 || ps.Waits != 2 {
		t.Errorf("proxy stats %+v: want 1 registration, 2 waits", ps)
	}
}

// TestBackendGone: a backend that cannot be connected to any more has its
// target deleted (drained); when it comes back, the next request
// registers it again and is held until it is ready.
func TestBackendGone(t *testing.T) {
	addr := refused.Reserve(t).Addr()
	e := start(t, []proxy.Backend{{Name: "gone", Addr: addr}}, proxy.Options{})
	stop := runPod(t, pod.New(pod.Options{Addr: addr}))
	if status, _, err := e.get(t, t.Context(), "gone", "/"); err != nil || status != http.StatusOK {
		t.Fatalf("first request: %d, %v", status, err)
	}
	stop()
	if status, _, err := e.get(t, t.Context(), "gone", "/"); err != nil || status != http.StatusBadGateway {
		t.Fatalf("request to the stopped pod: (%d, %v), want 502", status, err)
	}
	eventually(t, "the target is deleted", func() bool {
		_, err := e.c.Get(t.Context(), "gone")
		return errors.Is(err, client.ErrNotFound)
	})

	runPod(t, pod.New(pod.Options{Addr: addr, Delay: 200 * time.Millisecond}))
	if status, _, err := e.get(t, t.Context(), "gone", "/"); err != nil || status != http.StatusOK {
		t.Fatalf("request after the pod came back: (%d, %v), want 200", status, err)
	}
	if ps := e.proxy.Stats(); ps.Registrations != 2 || ps.Deleted != 1 {
		t.Errorf("proxy stats %+v: want 2 registrations, 1 deleted", ps)
	}
}

func TestHoldTimeout(t *testing.T) {
	e := start(t, []proxy.Backend{{Name: "never", Addr: refused.Reserve(t).Addr()}}, proxy.Options{HoldTimeout: 300 * time.Millisecond})
	status, body, err := e.get(t, t.Context(), "never", "/")
	if err != nil || status != http.StatusServiceUnavailable {
		t.Fatalf("got (%d, %q, %v), want 503", status, body, err)
	}
	t.Logf("503 body: %q", body)
}

func TestIdleAndClose(t *testing.T) {
	idle, busy := newSwitchable(t), newSwitchable(t)
	idle.ready.Store(true)
	busy.ready.Store(true)
	e := start(t, []proxy.Backend{{Name: "idle", Addr: idle.addr()}, {Name: "busy", Addr: busy.addr()}},
		proxy.Options{IdleTimeout: 300 * time.Millisecond})
	for _, name := range []string{"idle", "busy"} {
		if status, _, err := e.get(t, t.Context(), name, "/"); err != nil || status != http.StatusOK {
			t.Fatalf("%s: (%d, %v)", name, status, err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := e.c.Get(ctx, "idle"); errors.Is(err, client.ErrNotFound) {
			break
		}
		if _, _, err := e.get(t, ctx, "busy", "/"); err != nil {
			t.Fatalf("busy: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the idle backend's target was not deleted within 10s")
		case <-tick.C:
		}
	}
	if _, err := e.c.Get(t.Context(), "busy"); err != nil {
		t.Errorf("the busy backend's target: %v", err)
	}
	if err := e.proxy.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	eventually(t, "Close deletes the busy backend's target", func() bool {
		_, err := e.c.Get(t.Context(), "busy")
		return errors.Is(err, client.ErrNotFound)
	})
	status, _, err := e.get(t, t.Context(), "busy", "/")
	if err != nil || status != http.StatusServiceUnavailable {
		t.Errorf("request after Close: (%d, %v), want 503", status, err)
	}
}
