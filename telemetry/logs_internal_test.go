package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
)

// captured records log lines as "LEVEL msg k=v k=v" with the attributes
// named in keep, in order.
type captured struct {
	level slog.Level
	keep  []string

	mu    sync.Mutex
	lines []string // guarded by mu
}

func (c *captured) Enabled(_ context.Context, l slog.Level) bool { return l >= c.level }
func (c *captured) WithAttrs([]slog.Attr) slog.Handler           { return c }
func (c *captured) WithGroup(string) slog.Handler                { return c }
func (c *captured) Handle(_ context.Context, r slog.Record) error {
	got := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		got[a.Key] = a.Value.String()
		return true
	})
	line := r.Level.String() + " " + r.Message
	for _, k := range c.keep {
		if v, ok := got[k]; ok {
			line += " " + k + "=" + v
		}
	}
	c.mu.Lock()
	c.lines = append(c.lines, line)
	c.mu.Unlock()
	return nil
}

func (c *captured) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.lines
	c.lines = nil
	return l
}

func newTestLog(level slog.Level, maxRepeats int) (*eventLog, *captured, *clockwork.FakeClock) {
	h := &captured{level: level, keep: []string{"target", "probe", "result", "message", "repeated", "from", "to", "ready"}}
	clock := clockwork.NewFakeClock()
	return newEventLog(slog.New(h), clock, 30*time.Second, maxRepeats), h, clock
}

var (
	fail503 = probe.Outcome{Result: probe.Failure, Message: "HTTP probe failed with statuscode: 503"}
	fail500 = probe.Outcome{Result: probe.Failure, Message: "HTTP probe failed with statuscode: 500"}
	passed  = probe.Outcome{Result: probe.Success}
)

func TestEventLogRepeatedFailures(t *testing.T) {
	l, h, clock := newTestLog(slog.LevelDebug, DefaultMaxRepeats)
	ctx := context.Background()
	done := func(out probe.Outcome) { l.probeDone(ctx, "web", probe.Readiness, out) }

	for range 5 {
		done(fail503)
		clock.Advance(time.Second)
	}
	first := "DEBUG probe target=web probe=readiness result=failure message=HTTP probe failed with statuscode: 503"
	if diff := cmp.Diff([]string{first}, h.take()); diff != "" {
		t.Fatalf("five identical failures within 30s (-want +got):\n%s", diff)
	}
	clock.Advance(30 * time.Second)
	done(fail503)
	want := []string{"DEBUG probe failure repeated target=web probe=readiness result=failure message=HTTP probe failed with statuscode: 503 repeated=5"}
	if diff := cmp.Diff(want, h.take()); diff != "" {
		t.Fatalf("after 30s (-want +got):\n%s", diff)
	}
	done(fail503)
	done(fail500) // another message: the pending repetition, then the new one
	want = []string{
		"DEBUG probe failure repeated target=web probe=readiness result=failure message=HTTP probe failed with statuscode: 503 repeated=1",
		"DEBUG probe target=web probe=readiness result=failure message=HTTP probe failed with statuscode: 500",
	}
	if diff := cmp.Diff(want, h.take()); diff != "" {
		t.Fatalf("a new message (-want +got):\n%s", diff)
	}
	done(fail500)
	done(passed) // the run of failures ends
	want = []string{
		"DEBUG probe failure repeated target=web probe=readiness result=failure message=HTTP probe failed with statuscode: 500 repeated=1",
		"DEBUG probe target=web probe=readiness result=success",
	}
	if diff := cmp.Diff(want, h.take()); diff != "" {
		t.Fatalf("a success (-want +got):\n%s", diff)
	}
	done(passed)
	if got := h.take(); len(got) != 1 {
		t.Errorf("every success is logged at debug; got %q", got)
	}
	// Other probes and targets are tracked apart.
	done(fail503)
	l.probeDone(ctx, "web", probe.Liveness, fail503)
	l.probeDone(ctx, "api", probe.Readiness, fail503)
	if got := h.take(); len(got) != 3 {
		t.Errorf("first failures of three probes: %q, want 3 lines", got)
	}
}

func TestEventLogTransitionsClearRepeats(t *testing.T) {
	l, h, _ := newTestLog(slog.LevelDebug, DefaultMaxRepeats)
	ctx := context.Background()
	l.probeDone(ctx, "web", probe.Readiness, fail503)
	l.probeDone(ctx, "web", probe.Readiness, fail503)
	l.published(&engine.Event{Kind: engine.KindTransition, Name: "web", Probe: probe.Readiness, From: probe.Success, To: probe.Failure, Message: fail503.Message})
	l.probeDone(ctx, "web", probe.Readiness, fail503)
	want := []string{
		"DEBUG probe target=web probe=readiness result=failure message=HTTP probe failed with statuscode: 503",
		"DEBUG probe failure repeated target=web probe=readiness result=failure message=HTTP probe failed with statuscode: 503 repeated=1",
		"INFO probe transition target=web probe=readiness message=HTTP probe failed with statuscode: 503 from=success to=failure ready=false",
		"DEBUG probe target=web probe=readiness result=failure message=HTTP probe failed with statuscode: 503",
	}
	if diff := cmp.Diff(want, h.take()); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	l.published(&engine.Event{Kind: engine.KindDeleted, Name: "web", Reason: engine.ReasonTerminating})
	if n := len(l.repeats); n != 0 {
		t.Errorf("%d repetitions tracked after the target's deletion, want 0", n)
	}
	if diff := cmp.Diff([]string{"INFO target deleted target=web ready=false"}, h.take()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestEventLogBounded(t *testing.T) {
	l, _, _ := newTestLog(slog.LevelDebug, 10)
	for i := range 100 {
		l.probeDone(context.Background(), fmt.Sprint("t", i), probe.Readiness, fail503)
	}
	if n := len(l.repeats); n > 10 {
		t.Errorf("%d repetitions tracked, want at most 10", n)
	}
}

func TestEventLogInfo(t *testing.T) {
	l, h, _ := newTestLog(slog.LevelInfo, DefaultMaxRepeats)
	ctx := context.Background()
	for range 100 {
		l.probeDone(ctx, "web", probe.Readiness, fail503)
		l.probeDone(ctx, "web", probe.Readiness, passed)
	}
	if got := h.take(); len(got) != 0 {
		t.Fatalf("probes logged at info: %q", got)
	}
	if n := len(l.repeats); n != 0 {
		t.Errorf("%d repetitions tracked with debug off, want 0", n)
	}
	for _, ev := range []*engine.Event{
		{Kind: engine.KindCreated, Name: "web"},
		{Kind: engine.KindInitialized, Name: "web", Probe: probe.Liveness, From: probe.Success, To: probe.Success},
		{Kind: engine.KindTransition, Name: "web", Probe: probe.Readiness, From: probe.Failure, To: probe.Success, Ready: true},
		{Kind: engine.KindTerminating, Name: "web", Reason: engine.ReasonTerminating},
	} {
		l.published(ev)
	}
	want := []string{
		"INFO target created target=web ready=false",
		"INFO probe initialized target=web probe=liveness from=success to=success ready=false",
		"INFO probe transition target=web probe=readiness from=failure to=success ready=true",
		"INFO target terminating target=web ready=false",
	}
	if diff := cmp.Diff(want, h.take()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestEventLogJSON(t *testing.T) {
	var b strings.Builder
	l := newEventLog(slog.New(slog.NewJSONHandler(&b, nil)), clockwork.NewFakeClock(), time.Second, 10)
	l.published(&engine.Event{Kind: engine.KindTransition, Name: "web", Revision: 7, Probe: probe.Readiness, From: probe.Failure, To: probe.Success, Latency: time.Millisecond})
	for _, want := range []string{`"msg":"probe transition"`, `"target":"web"`, `"revision":7`, `"from":"failure"`, `"to":"success"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("JSON line %s lacks %s", b.String(), want)
		}
	}
}
