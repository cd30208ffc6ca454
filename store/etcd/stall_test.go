package etcd_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/tcpproxy"
	"github.com/probed/probed/store/etcd"
)

// TestEngineStalledWhenCutOff: an engine over etcd whose path to etcd
// hangs (a paused proxy) is Stalled — what cluster mode renews its lease
// on — once a revision the store had is not in its view within the
// bound, and once a write of its own has been in progress longer than the
// bound; when the path is back and the work done, it is not.
func TestEngineStalledWhenCutOff(t *testing.T) {
	t.Parallel()
	const bound = 5 * time.Second
	c := etcdtest.Start(t)
	direct := c.Client(t)
	proxy := tcpproxy.Start(t, c.Endpoints()[0])
	cut := startReplica(t, open(t, etcdtest.ClientOf(t, proxy.Addr()), etcd.Options{ReplicaID: "cut"}))
	writer := open(t, direct, etcd.Options{ReplicaID: "writer"})
	stalled := func(known uint64) error { return cut.eng.Stalled(bound, known) }

	known := keyspace.Position(currentRevision(t, direct))
	if err := stalled(known); err != nil {
		t.Fatalf("Stalled before the cut = %v", err)
	}
	cut.clock.Advance(bound)
	if err := stalled(known); err != nil {
		t.Fatalf("Stalled with the view at etcd's revision = %v", err)
	}

	proxy.Pause()
	commit(t, writer, create("elsewhere"))
	known = keyspace.Position(currentRevision(t, direct))
	if err := stalled(known); err != nil {
		t.Fatalf("Stalled right after a write it has not seen = %v, want nil (not yet a bound)", err)
	}
	cut.clock.Advance(bound)
	if err := stalled(known); err == nil || !strings.Contains(err.Error(), "view has not reached") {
		t.Errorf("Stalled a bound after a revision its view did not reach = %v, want the view named", err)
	}

	created := make(chan error, 1)
	go func() {
		_, err := cut.eng.Create(t.Context(), &target.Spec{Name: "here"})
		created <- err
	}()
	// The create's write hangs in the paused proxy once it reaches the
	// store; each poll moves the fake clock a second, past the bound.
	poll.Every(20*time.Millisecond).UntilMet(t, "Stalled naming the hanging write", 20*time.Second, func() string {
		cut.clock.Advance(time.Second)
		if err := stalled(0); err == nil || !strings.Contains(err.Error(), "store write") {
			return fmt.Sprintf("Stalled = %v", err)
		}
		return ""
	})

	proxy.Resume()
	select {
	case err := <-created:
		if err != nil && !errors.Is(err, engine.ErrAlreadyExists) {
			t.Fatalf("the create after the path came back: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the create did not end 30s after the path came back")
	}
	known = keyspace.Position(currentRevision(t, direct))
	poll.UntilMet(t, "the view caught up", 20*time.Second, func() string {
		if cut.eng.Revision() >= known {
			return ""
		}
		return fmt.Sprintf("the view did not catch up: at %d, etcd at %d", cut.eng.Revision(), known)
	})
	cut.clock.Advance(bound)
	if err := stalled(known); err != nil {
		t.Errorf("Stalled once the path is back and the work done = %v", err)
	}
}
