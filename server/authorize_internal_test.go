package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/server/auth"
)

// A Watch stream follows the policy from what its caller was granted when
// the stream was authorized: a reload that comes before the policy's
// goroutine first runs (a loaded machine, the stream's snapshot already
// sent) still ends the stream. watchPolicy used to read the grants itself
// when it started, so such a reload went unseen and the stream kept
// access the policy had taken away (a CI hang of client's
// TestAuthorization).
func TestWatchPolicySeesAReloadBeforeItRuns(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(rules string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(rules), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("rules:\n- {identities: [reader], names: [ns/], verbs: [read]}\n")
	policy, err := auth.LoadPolicy(file)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{opts: Options{Authorizer: policy}}
	grants := policy.Grants("reader") // as Watch takes them, before it streams

	write("rules:\n- {identities: [nobody], names: [ns/], verbs: [read]}\n")
	if changed, err := policy.Reload(); err != nil || !changed {
		t.Fatalf("Reload = %v, %v", changed, err)
	}

	ctx, cancel := context.WithCancelCause(engine.WithClient(context.Background(), "reader"))
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.watchPolicy(ctx, cancel, grants)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("watchPolicy did not end the stream of a caller whose access a reload took away before it ran")
	}
	if cause := context.Cause(ctx); !errors.Is(cause, errAccessChanged) {
		t.Errorf("the stream ended with %v, want errAccessChanged", cause)
	}
}
