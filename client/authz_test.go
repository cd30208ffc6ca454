package client_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/teststore"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server"
	"github.com/probed/probed/server/auth"
)

const authzPolicy = `rules:
  - identities: [team-a-ci]
    names: ["team-a/"]
    verbs: [read, write, operate]
  - identities: [reader]
    names: [""]
    verbs: [read]
  - identities: [admin]
    names: [""]
    verbs: [read, write, operate]
`

// authzServer starts a probed over a store of kind k with token
// authentication and the policy above, and returns it with the policy
// (whose file a test may rewrite, then Reload) and clients per identity.
func authzServer(t *testing.T, k teststore.Kind) (*auth.Policy, string, map[string]*client.Client) {
	t.Helper()
	dir := t.TempDir()
	tokens, policyFile := filepath.Join(dir, "tokens"), filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(tokens, []byte("tok-a-0123456789abcdef team-a-ci\ntok-r-0123456789abcdef reader\ntok-x-0123456789abcdef admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policyFile, []byte(authzPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	tk, err := auth.LoadTokens(tokens)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := auth.LoadPolicy(policyFile)
	if err != nil {
		t.Fatal(err)
	}
	s := probedtest.Start(t, probedtest.Options{
		Store:  teststore.Open(t, k),
		GRPC:   auth.New(auth.Options{Tokens: tk}).ServerOptions(),
		Server: server.Options{Authorizer: policy},
	})
	clients := map[string]*client.Client{
		"team-a-ci": dial(t, s.Addr, client.WithToken("tok-a-0123456789abcdef")),
		"reader":    dial(t, s.Addr, client.WithToken("tok-r-0123456789abcdef")),
		"admin":     dial(t, s.Addr, client.WithToken("tok-x-0123456789abcdef")),
	}
	return policy, policyFile, clients
}

// TestAuthorization: with a policy, every RPC is allowed or denied by
// identity, verb and name prefix (PermissionDenied naming all three);
// ListTargets and Watch (snapshot and replay) show only what the caller
// may read; an ApplyTargets may only hold names the caller may write; a
// policy reload that changes a caller's access ends its Watch stream.
func TestAuthorization(t *testing.T) {
	t.Parallel()
	for _, k := range teststore.Kinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			authorization(t, k)
		})
	}
}

func authorization(t *testing.T, k teststore.Kind) {
	ctx := t.Context()
	policy, policyFile, cs := authzServer(t, k)
	for _, n := range []string{"team-a/web", "team-b/web", "solo"} {
		if _, err := cs["admin"].Create(ctx, plain(n, nil)); err != nil {
			t.Fatal(err)
		}
	}
	calls := []struct {
		verb string
		call func(c *client.Client, name string) error
	}{
		{"read", func(c *client.Client, n string) error { _, err := c.Get(ctx, n); return err }},
		{"write", func(c *client.Client, n string) error { _, err := c.Create(ctx, plain(n+"-new", nil)); return err }},
		{"write", func(c *client.Client, n string) error {
			_, err := c.Update(ctx, plain(n, map[string]string{"x": "y"}))
			return err
		}},
		{"operate", func(c *client.Client, n string) error { _, err := c.Reset(ctx, n); return err }},
		{"operate", func(c *client.Client, n string) error {
			_, err := c.Trigger(ctx, n, probev1.ProbeType_PROBE_TYPE_READINESS)
			if errors.Is(err, client.ErrNotFound) {
				return nil // allowed: the target has no such probe
			}
			return err
		}},
		{"write", func(c *client.Client, n string) error {
			_, err := c.ApplyTargets(ctx, client.TargetSet{Owner: "o-" + strings.ReplaceAll(n, "/", "-"), Targets: []*probev1.Target{plain(n+"-set", nil)}})
			return err
		}},
		{"write", func(c *client.Client, n string) error { _, err := c.Delete(ctx, n, client.GracePeriod(0)); return err }},
	}
	cases := []struct {
		identity, name string
		allowed        map[string]bool
	}{
		{"team-a-ci", "team-a/web", map[string]bool{"read": true, "write": true, "operate": true}},
		{"team-a-ci", "team-b/web", map[string]bool{}},
		{"reader", "team-b/web", map[string]bool{"read": true}},
		{"reader", "solo", map[string]bool{"read": true}},
	}
	for _, c := range cases {
		for i, call := range calls {
			err := call.call(cs[c.identity], c.name)
			switch {
			case c.allowed[call.verb] && err != nil:
				t.Errorf("%s, call %d (%s) of %s: %v, want allowed", c.identity, i, call.verb, c.name, err)
			case !c.allowed[call.verb] && !errors.Is(err, client.ErrPermissionDenied):
				t.Errorf("%s, call %d (%s) of %s: %v, want PermissionDenied", c.identity, i, call.verb, c.name, err)
			case !c.allowed[call.verb] && strings.Contains(err.Error(), "may not write any target"):
				// An ApplyTargets of a caller granted write on no name is
				// refused before its set, and so any name, is read.
				if !namesAll(err.Error(), c.identity, call.verb) {
					t.Errorf("%s, call %d: %q does not name the identity and the verb", c.identity, i, err)
				}
			case !c.allowed[call.verb] && !namesAll(err.Error(), c.identity, call.verb, c.name):
				t.Errorf("%s, call %d: %q does not name the identity, the verb and the name", c.identity, i, err)
			}
		}
	}

	// A set sync prunes only what its caller may write.
	shared := client.TargetSet{Owner: "shared", Targets: []*probev1.Target{plain("team-a/s", nil), plain("team-b/s", nil)}}
	if _, err := cs["admin"].ApplyTargets(ctx, shared); err != nil {
		t.Fatal(err)
	}
	pruned, err := cs["team-a-ci"].ApplyTargets(ctx, client.TargetSet{Owner: "shared"})
	if err != nil || !slices.Equal(pruned.GetDeleted(), []string{"team-a/s"}) {
		t.Errorf("team-a-ci's empty sync of shared: deleted %v (%v), want team-a/s only", pruned.GetDeleted(), err)
	}

	// List and Watch, snapshot and replay: team-a-ci reads team-a/ only.
	all, err := cs["team-a-ci"].ListAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, tg := range all {
		listed = append(listed, tg.GetName())
	}
	if slices.ContainsFunc(listed, func(n string) bool { return !strings.HasPrefix(n, "team-a/") }) || len(listed) == 0 {
		t.Errorf("team-a-ci lists %v, want team-a/ only", listed)
	}
	for _, since := range []uint64{0, 1} {
		wctx, cancel := context.WithCancel(ctx)
		seen := map[string]bool{}
		for ev := range cs["team-a-ci"].Watch(wctx, client.WithSince(since)) {
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			for _, e := range ev.Events {
				seen[e.GetName()] = true
			}
			if ev.SnapshotComplete || (since > 0 && ev.Revision >= all[len(all)-1].GetStatus().GetRevision()) {
				break
			}
		}
		cancel()
		for n := range seen {
			if !strings.HasPrefix(n, "team-a/") {
				t.Errorf("team-a-ci's watch from %d sent an event of %s", since, n)
			}
		}
		if len(seen) == 0 {
			t.Errorf("team-a-ci's watch from %d sent nothing", since)
		}
	}

	// A reload that takes the reader's rule away ends its watch.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := cs["reader"].Watch(wctx)
	for ev := range events {
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
		if ev.SnapshotComplete {
			break
		}
	}
	if err := os.WriteFile(policyFile, []byte(strings.Replace(authzPolicy, "identities: [reader]", "identities: [nobody]", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := policy.Reload(); err != nil || !changed {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	var end error
	for ev := range events {
		if ev.Err != nil {
			end = ev.Err
			break
		}
	}
	if !errors.Is(end, client.ErrPermissionDenied) {
		t.Errorf("the reader's watch after the reload ended with %v, want PermissionDenied", end)
	}
	if _, err := cs["reader"].Get(ctx, "solo"); !errors.Is(err, client.ErrPermissionDenied) {
		t.Errorf("reader's Get after the reload: %v, want PermissionDenied", err)
	}
}

// namesAll reports whether msg contains every one of words.
func namesAll(msg string, words ...string) bool {
	for _, w := range words {
		if !strings.Contains(msg, w) {
			return false
		}
	}
	return true
}
