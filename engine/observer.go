package engine

import (
	"context"
	"time"

	"github.com/probed/probed/engine/probe"
)

// Observer receives what the engine does, for metrics, traces and logs.
// Methods are called from the engine's hot paths: they must be cheap, must
// not block, and may be called concurrently.
type Observer interface {
	// ProbeStarted is called before a check runs; the context it returns
	// is the check's (it may carry a trace span, which the HTTP checker can
	// propagate to the target).
	ProbeStarted(ctx context.Context, target string, typ probe.Type) context.Context
	// ProbeDone is called after every check with the context ProbeStarted
	// returned.
	ProbeDone(ctx context.Context, target string, typ probe.Type, out probe.Outcome)
	// Published is called for every event this engine wrote, once it is
	// durable and before it is visible (so a client that saw the event
	// finds it counted).
	Published(ev *Event)
	// Ready is called when a target becomes ready for the first time since
	// its creation or reset, with the time that took (the cold-start
	// figure).
	Ready(target string, sinceStart time.Duration)
	// Committed is called after each store transaction.
	Committed(changes int, took time.Duration)
	// WatcherEvicted is called when a watcher is ended as too slow.
	WatcherEvicted()
}

// NopObserver observes nothing.
type NopObserver struct{}

func (NopObserver) ProbeStarted(ctx context.Context, _ string, _ probe.Type) context.Context {
	return ctx
}
func (NopObserver) ProbeDone(context.Context, string, probe.Type, probe.Outcome) {}
func (NopObserver) Published(*Event)                                             {}
func (NopObserver) Ready(string, time.Duration)                                  {}
func (NopObserver) Committed(int, time.Duration)                                 {}
func (NopObserver) WatcherEvicted()                                              {}
