package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
)

// readyRecorder records, for each Ready call, whether the store already
// held the target as ready.
type readyRecorder struct {
	engine.NopObserver
	store engine.Store
	ready chan bool
}

func (o *readyRecorder) Ready(name string, _ time.Duration) {
	st, err := o.store.Load(context.Background())
	durable := false
	if err == nil {
		for _, tg := range st.Targets {
			durable = durable || (tg.Spec.Name == name && tg.Status.Ready())
		}
	}
	o.ready <- durable
}

// TestReadyIsObservedOnceDurable: the cold-start figure is reported once
// the change that made the target ready is durable, like every other
// observation of a change.
func TestReadyIsObservedOnceDurable(t *testing.T) {
	obs := &readyRecorder{ready: make(chan bool, 4)}
	h := newHarness(t, func(o *engine.Options) {
		obs.store = o.Store
		o.Observer = obs
	})
	b := h.newBackend(200)
	h.create(&target.Spec{Name: "web", ReadinessProbe: b.probe(1, -900)})
	select {
	case durable := <-obs.ready:
		if !durable {
			t.Error("Observer.Ready was called before the store held the target as ready")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no Observer.Ready call")
	}
}
