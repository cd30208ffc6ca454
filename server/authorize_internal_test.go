package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
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
	policy, reload := loadPolicy(t, "rules:\n- {identities: [reader], names: [ns/], verbs: [read]}\n")
	s := &Server{opts: Options{Authorizer: policy}}
	grants := policy.Grants("reader") // as Watch takes them, before it streams

	reload("rules:\n- {identities: [nobody], names: [ns/], verbs: [read]}\n")

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

// A resumed apply is authorized again under today's policy: its caller
// may still write every target of its list, and it resumes with its
// prunes limited to what the caller may write; one target it may no
// longer write (a reload since the call) refuses the resume, as a new
// call of the same list would be refused.
func TestResumedApplyAuthorizedAgain(t *testing.T) {
	policy, reload := loadPolicy(t, "rules:\n- {identities: [alice], names: [ns/], verbs: [write]}\n")
	s := &Server{opts: Options{Authorizer: policy}}
	list := func() *engine.ApplySet {
		return &engine.ApplySet{Owner: "ns/set", Targets: []*target.Spec{{Name: "ns/a"}, {Name: "ns/b"}}}
	}

	set := list()
	if err := s.resumed(set, "alice"); err != nil {
		t.Fatalf("resume of a list alice may write: %v", err)
	}
	if set.Writable == nil || !set.Writable("ns/x") || set.Writable("other/x") || set.Forward == nil {
		t.Errorf("the resumed set: Writable %v, Forward %v; want alice's write permission and forwarding", set.Writable != nil, set.Forward)
	}

	reload("rules:\n- {identities: [alice], names: [ns/a], verbs: [write]}\n")
	err := s.resumed(list(), "alice")
	if !errors.Is(err, ErrResumeRefused) || !strings.Contains(err.Error(), `"ns/b"`) {
		t.Errorf("resume after alice lost ns/b: %v, want ErrResumeRefused naming ns/b", err)
	}
	if err := s.resumed(list(), "mallory"); !errors.Is(err, ErrResumeRefused) {
		t.Errorf("resume as an identity with no rule: %v, want ErrResumeRefused", err)
	}
}

// loadPolicy loads an authorization policy of rules from a file, and
// returns it with reload, which rewrites the file and reloads it (failing
// the test unless the policy changed).
func loadPolicy(t *testing.T, rules string) (*auth.Policy, func(rules string)) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	policy, err := auth.LoadPolicy(file)
	if err != nil {
		t.Fatal(err)
	}
	return policy, func(rules string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(rules), 0o600); err != nil {
			t.Fatal(err)
		}
		if changed, err := policy.Reload(); err != nil || !changed {
			t.Fatalf("Reload = %v, %v", changed, err)
		}
	}
}
