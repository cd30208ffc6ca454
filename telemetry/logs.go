package telemetry

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
)

// Defaults of the log summary of repeated probe failures.
const (
	// DefaultRepeatInterval is how often, at most, a probe that keeps
	// failing with the same message is logged again (with the number of
	// repetitions).
	DefaultRepeatInterval = 30 * time.Second
	// DefaultMaxRepeats bounds the number of failing probes whose
	// repetitions are tracked; beyond it one is forgotten at random.
	DefaultMaxRepeats = 10000
)

// The messages of the log lines.
const (
	msgProbe         = "probe"
	msgProbeRepeated = "probe failure repeated"
	msgTransition    = "probe transition"
	msgInitialized   = "probe initialized"
)

// eventLog logs what an operator needs to follow the engine: one line per
// published event at info (a transition, a target created, deleted...),
// and one line per probe execution at debug, where a probe that keeps
// failing with the same message is summarised: its first failure is
// logged, then a "probe failure repeated" line with the count at most
// every interval. It never logs one line per probe at info.
type eventLog struct {
	log      *slog.Logger
	clock    clockwork.Clock
	interval time.Duration
	max      int

	mu      sync.Mutex
	repeats map[repeatKey]*repeat // guarded by mu
}

type repeatKey struct {
	target string
	typ    probe.Type
}

// repeat is the failure a probe keeps repeating.
type repeat struct {
	result     probe.Result
	message    string
	first      time.Time // of this message
	logged     time.Time // last line logged
	suppressed int       // repetitions since then
}

func newEventLog(log *slog.Logger, clock clockwork.Clock, interval time.Duration, maxRepeats int) *eventLog {
	return &eventLog{log: log, clock: clock, interval: interval, max: maxRepeats, repeats: make(map[repeatKey]*repeat)}
}

// probeDone logs one probe execution at debug; it does nothing (and
// costs one Enabled call) when debug is off.
func (l *eventLog) probeDone(ctx context.Context, target string, typ probe.Type, out probe.Outcome) {
	if !l.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	key := repeatKey{target, typ}
	now := l.clock.Now()
	if out.Result == probe.Success {
		l.mu.Lock()
		r := l.repeats[key]
		delete(l.repeats, key)
		l.mu.Unlock()
		l.flush(ctx, key, r)
		l.log.LogAttrs(ctx, slog.LevelDebug, msgProbe, probeAttrs(target, typ, out)...)
		return
	}
	l.mu.Lock()
	r, ok := l.repeats[key]
	if ok && r.message == out.Message && r.result == out.Result {
		r.suppressed++
		if now.Sub(r.logged) < l.interval {
			l.mu.Unlock()
			return
		}
		n, first := r.suppressed, r.first
		r.suppressed, r.logged = 0, now
		l.mu.Unlock()
		l.log.LogAttrs(ctx, slog.LevelDebug, msgProbeRepeated, append(probeAttrs(target, typ, out),
			slog.Int("repeated", n), slog.Time("since", first))...)
		return
	}
	var prev *repeat
	if ok {
		prev = &repeat{}
		*prev = *r
	} else if len(l.repeats) >= l.max {
		for k := range l.repeats {
			delete(l.repeats, k)
			break
		}
	}
	l.repeats[key] = &repeat{result: out.Result, message: out.Message, first: now, logged: now}
	l.mu.Unlock()
	l.flush(ctx, key, prev)
	l.log.LogAttrs(ctx, slog.LevelDebug, msgProbe, probeAttrs(target, typ, out)...)
}

// flush logs the repetitions of r not logged yet, if any.
func (l *eventLog) flush(ctx context.Context, key repeatKey, r *repeat) {
	if r == nil || r.suppressed == 0 {
		return
	}
	l.log.LogAttrs(ctx, slog.LevelDebug, msgProbeRepeated,
		slog.String("target", key.target), slog.String("probe", key.typ.String()),
		slog.String("result", r.result.String()), slog.String("message", r.message),
		slog.Int("repeated", r.suppressed), slog.Time("since", r.first))
}

// forget drops the repetition state of target's probe typ, or of all its
// probes if all, logging what it had not logged yet.
func (l *eventLog) forget(ctx context.Context, target string, typ probe.Type, all bool) {
	var dropped []repeatKey
	var rs []*repeat
	l.mu.Lock()
	for _, t := range probe.Types {
		if !all && t != typ {
			continue
		}
		k := repeatKey{target, t}
		if r, ok := l.repeats[k]; ok {
			delete(l.repeats, k)
			dropped, rs = append(dropped, k), append(rs, r)
		}
	}
	l.mu.Unlock()
	for i, k := range dropped {
		if l.log.Enabled(ctx, slog.LevelDebug) {
			l.flush(ctx, k, rs[i])
		}
	}
}

func probeAttrs(target string, typ probe.Type, out probe.Outcome) []slog.Attr {
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs,
		slog.String("target", target), slog.String("probe", typ.String()),
		slog.String("result", out.Result.String()), slog.Duration("latency", out.Latency))
	if out.Message != "" {
		attrs = append(attrs, slog.String("message", out.Message))
	}
	return attrs
}

// published logs ev at info and clears the repetition state it ends.
func (l *eventLog) published(ev *engine.Event) {
	ctx := context.Background()
	switch ev.Kind {
	case engine.KindTransition, engine.KindInitialized:
		l.forget(ctx, ev.Name, ev.Probe, false)
	case engine.KindDeleted, engine.KindReset, engine.KindUpdated:
		l.forget(ctx, ev.Name, 0, true)
	default:
	}
	if !l.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.String("target", ev.Name), slog.Uint64("revision", ev.Revision))
	msg := "target " + strings.ToLower(ev.Kind.String())
	switch ev.Kind {
	case engine.KindTransition, engine.KindInitialized:
		msg = msgTransition
		if ev.Kind == engine.KindInitialized {
			msg = msgInitialized
		}
		attrs = append(attrs, slog.String("probe", ev.Probe.String()),
			slog.String("from", ev.From.String()), slog.String("to", ev.To.String()),
			slog.Int("consecutive", int(ev.Consecutive)), slog.Duration("latency", ev.Latency))
		if ev.Initialized && ev.Kind == engine.KindTransition {
			attrs = append(attrs, slog.Bool("initialized", true))
		}
	default:
	}
	if ev.Message != "" {
		attrs = append(attrs, slog.String("message", ev.Message))
	}
	if ev.Reason != "" && ev.Reason != engine.ReasonProbe {
		attrs = append(attrs, slog.String("reason", ev.Reason))
	}
	attrs = append(attrs, slog.Bool("started", ev.Started), slog.Bool("ready", ev.Ready), slog.Bool("live", ev.Live))
	l.log.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
}
