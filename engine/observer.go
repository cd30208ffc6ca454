package engine

import (
	"time"

	"github.com/probed/probed/engine/probe"
)

// Observer receives what the engine does, for metrics and logs. Methods
// are called from the engine's hot paths and must be cheap and must not
// block; they may be called concurrently.
type Observer interface {
	// ProbeDone is called after every probe execution.
	ProbeDone(target string, typ probe.Type, out probe.Outcome)
	// Published is called for every event once it is durable and visible.
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

func (NopObserver) ProbeDone(string, probe.Type, probe.Outcome) {}
func (NopObserver) Published(*Event)                            {}
func (NopObserver) Ready(string, time.Duration)                 {}
func (NopObserver) Committed(int, time.Duration)                {}
func (NopObserver) WatcherEvicted()                             {}
