package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/server"
	"github.com/probed/probed/ui"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// page is a probed (engine on a fake clock, so that probes run only when a
// test triggers them) with its status page on a loopback HTTP server.
type page struct {
	probed *probedtest.Server
	eng    *engine.Engine
	clock  *clockwork.FakeClock // the page's: stats and progress messages
	url    string
}

type pageOptions struct {
	engine  engine.Options
	protect func(http.Handler) http.Handler
	// viewJSON: leave ui.Options.TargetJSON unset (the page's own view);
	// otherwise it is server.TargetJSON, as probed sets it.
	viewJSON bool
	// cluster is ui.Options.Cluster.
	cluster ui.Cluster
	// visible is ui.Options.Visible.
	visible func(ctx context.Context) func(name string) bool
}

func newPage(t *testing.T, o pageOptions) *page {
	t.Helper()
	p := &page{clock: clockwork.NewFakeClock()}
	p.probed = probedtest.Start(t, probedtest.Options{Clock: clockwork.NewFakeClock(), Engine: o.engine})
	p.eng = p.probed.Engine
	uo := ui.Options{Clock: p.clock, TargetJSON: server.TargetJSON, Cluster: o.cluster, Visible: o.visible}
	if o.viewJSON {
		uo.TargetJSON = nil
	}
	srv := ui.New(p.eng, uo)
	var h http.Handler = srv
	if o.protect != nil {
		h = o.protect(h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hs := httptest.NewUnstartedServer(h)
	hs.Config.BaseContext = func(net.Listener) context.Context { return ctx }
	hs.Start()
	var wg sync.WaitGroup
	wg.Go(func() { srv.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		hs.Close()
		wg.Wait()
	})
	p.url = hs.URL
	return p
}

func (p *page) create(t *testing.T, spec *target.Spec) *engine.Target {
	t.Helper()
	tg, err := p.eng.Create(t.Context(), spec)
	if err != nil {
		t.Fatalf("Create(%s): %v", spec.Name, err)
	}
	return tg
}

// tcpTarget is a target whose readiness probe connects to addr; it runs
// only when triggered (the initial delay is an hour of the fake clock).
func tcpTarget(name string, port int32) *target.Spec {
	return &target.Spec{Name: name, Labels: map[string]string{"app": name}, ReadinessProbe: &probe.Spec{
		Handler:             probe.Handler{TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: port}},
		PeriodSeconds:       10,
		InitialDelaySeconds: 3600,
	}}
}

// sseMsg is one server-sent event as the browser parses it.
type sseMsg struct {
	event, id, data string
	hasID           bool
	retry           string
}

// stream is an open /api/events.
type stream struct {
	t    *testing.T
	resp *http.Response
	msgs chan sseMsg
}

// openStream opens the event stream with the headers given ("Last-Event-ID")
// and the query (e.g. "after=3"); it is closed when the test ends.
func (p *page) openStream(t *testing.T, header http.Header, query string) *stream {
	t.Helper()
	u := p.url + "/api/events"
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %s %s", u, resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q, want text/event-stream", ct)
	}
	s := &stream{t: t, resp: resp, msgs: make(chan sseMsg, 64)}
	var wg sync.WaitGroup
	wg.Go(func() { parseSSE(resp.Body, s.msgs) })
	t.Cleanup(func() {
		resp.Body.Close()
		wg.Wait()
	})
	return s
}

// parseSSE reads messages until the body ends, then closes out.
func parseSSE(r io.Reader, out chan<- sseMsg) {
	defer close(out)
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	var m sseMsg
	empty := true
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if !empty {
				out <- m
			}
			m, empty = sseMsg{}, true
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		empty = false
		switch field {
		case "event":
			m.event = value
		case "id":
			m.id, m.hasID = value, true
		case "data":
			m.data += value
		case "retry":
			m.retry = value
		}
	}
}

// next returns the next message (failing after 10s).
func (s *stream) next() sseMsg {
	s.t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			s.t.Fatal("the stream ended")
		}
		return m
	case <-time.After(10 * time.Second):
		s.t.Fatal("no message within 10s")
	}
	panic("unreachable")
}

// nextEvent returns the next message named event, failing on any other.
func (s *stream) nextEvent(event string, v any) sseMsg {
	s.t.Helper()
	m := s.next()
	if m.event != event {
		s.t.Fatalf("got %q message (%s), want %q", m.event, m.data, event)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(m.data), v); err != nil {
			s.t.Fatalf("%s data %s: %v", event, m.data, err)
		}
	}
	return m
}

// ended reports whether the stream ends within 10s (after any messages).
func (s *stream) ended() bool {
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-s.msgs:
			if !ok {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// The JSON the page receives (only what the tests look at).
type (
	targetJSON struct {
		Name   string               `json:"name"`
		Phase  string               `json:"phase"`
		Ready  bool                 `json:"ready"`
		Rev    uint64               `json:"rev"`
		Labels map[string]string    `json:"labels"`
		Probes map[string]probeJSON `json:"probes"`
		// Replica is absent on a single node.
		Replica *string `json:"replica"`
	}
	probeJSON struct {
		Result   string  `json:"result"`
		PeriodMs float64 `json:"periodMs"`
	}
	snapshotJSON struct {
		Targets  []targetJSON `json:"targets"`
		Complete bool         `json:"complete"`
		Revision uint64       `json:"revision"`
	}
	eventJSON struct {
		Rev    uint64      `json:"rev"`
		Name   string      `json:"name"`
		Kind   string      `json:"kind"`
		Probe  string      `json:"probe"`
		From   string      `json:"from"`
		To     string      `json:"to"`
		Ready  bool        `json:"ready"`
		Target *targetJSON `json:"target"`
	}
	eventsJSON struct {
		Events   []eventJSON `json:"events"`
		Revision uint64      `json:"revision"`
	}
	recentJSON struct {
		Events    []eventJSON `json:"events"`
		Timelines map[string]struct {
			Start   *int       `json:"start"`
			Created int64      `json:"created"`
			Changes [][2]int64 `json:"changes"`
		} `json:"timelines"`
		From int64 `json:"from"`
		To   int64 `json:"to"`
	}
	statsJSON struct {
		Targets []struct {
			Name    string  `json:"name"`
			Replica *string `json:"replica"`
			Probes  map[string]struct {
				Total     uint64  `json:"total"`
				Message   string  `json:"message"`
				LatencyUs int64   `json:"latencyUs"`
				Results   string  `json:"results"`
				Latencies []int64 `json:"latencies"`
			} `json:"probes"`
		} `json:"targets"`
	}
)
