package client_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/teststore"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestApplyTargetsOverStores: ApplyTargets over bbolt and over etcd
// (cluster mode's store, one replica): create, update, prune, the same
// set again changing nothing, a dry run, conflicts with another owner and
// with CreateTarget, a plain delete of an owned target, and 10,000
// targets in one call. Names are namespaced, so the stores' keys and the
// List and Watch filters see NAMESPACE/NAME.
func TestApplyTargetsOverStores(t *testing.T) {
	t.Parallel()
	overStores(t, []storeCase{
		{"create update prune, idempotent", applyConverges},
		{"dry run changes nothing", applyDryRun},
		{"conflicts: another owner, CreateTarget", applyConflicts},
		{"10,000 targets in one call", applyTenThousand},
		{"probes keep their state", applyKeepsProbes},
	})
}

// result is the lists of a reply, for comparing.
type result struct {
	Created, Updated, Unchanged, Deleted, Conflicts []string
}

func resultOf(r *probev1.ApplyTargetsResponse) result {
	out := result{Created: r.GetCreated(), Updated: r.GetUpdated(), Unchanged: r.GetUnchanged(), Deleted: r.GetDeleted()}
	for _, c := range r.GetConflicts() {
		out.Conflicts = append(out.Conflicts, c.GetName())
	}
	return out
}

func mustApply(t *testing.T, c *client.Client, set client.TargetSet, want result) *probev1.ApplyTargetsResponse {
	t.Helper()
	resp, err := c.ApplyTargets(t.Context(), set)
	if err != nil {
		t.Fatalf("ApplyTargets: %v", err)
	}
	if diff := cmp.Diff(want, resultOf(resp), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("ApplyTargets (-want +got):\n%s", diff)
	}
	return resp
}

func listNames(t *testing.T, c *client.Client, ns string) []string {
	t.Helper()
	all, err := c.ListAllOf(t.Context(), client.ListOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tg := range all {
		out = append(out, tg.GetName())
	}
	return out
}

var sel = map[string]string{"set": "a"}

func member(name string, extra ...string) *probev1.Target {
	labels := map[string]string{"set": "a"}
	for i := 0; i+1 < len(extra); i += 2 {
		labels[extra[i]] = extra[i+1]
	}
	return &probev1.Target{Name: name, Labels: labels}
}

func applyConverges(t *testing.T, k teststore.Kind) {
	ctx := t.Context()
	s, c := startOver(t, k, probedtest.Options{})
	set := client.TargetSet{Owner: "ctl/a", Selector: sel, Targets: []*probev1.Target{member("ns/web-0.eu"), member("ns/web-1.eu"), member("ns/db")}}
	first := mustApply(t, c, set, result{Created: []string{"ns/db", "ns/web-0.eu", "ns/web-1.eu"}})
	got, err := c.Get(ctx, "ns/db")
	if err != nil || got.GetOwner() != "ctl/a" {
		t.Fatalf("Get ns/db = owner %q, %v; want ctl/a", got.GetOwner(), err)
	}

	// The same set again: nothing, not even a revision.
	again := mustApply(t, c, set, result{Unchanged: []string{"ns/db", "ns/web-0.eu", "ns/web-1.eu"}})
	if again.GetRevision() != first.GetRevision() {
		t.Errorf("the same set again moved the revision from %d to %d", first.GetRevision(), again.GetRevision())
	}

	// One changed, one left out (pruned), one added.
	set.Targets = []*probev1.Target{member("ns/web-0.eu", "tier", "front"), member("ns/web-1.eu"), member("ns/web-2.eu")}
	third := mustApply(t, c, set, result{Created: []string{"ns/web-2.eu"}, Updated: []string{"ns/web-0.eu"}, Unchanged: []string{"ns/web-1.eu"}, Deleted: []string{"ns/db"}})
	if third.GetRevision() <= first.GetRevision() {
		t.Errorf("revision %d after a change, was %d", third.GetRevision(), first.GetRevision())
	}
	if got, _ := c.Get(ctx, "ns/web-0.eu"); got.GetLabels()["tier"] != "front" || got.GetOwner() != "ctl/a" {
		t.Errorf("ns/web-0.eu after the update: labels %v, owner %q", got.GetLabels(), got.GetOwner())
	}

	// A plain delete of an owned target is allowed; the next apply
	// recreates it once it is gone.
	if _, err := c.Delete(ctx, "ns/web-1.eu", client.GracePeriod(0)); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	waitGone(t, c, "ns/web-1.eu")
	mustApply(t, c, set, result{Created: []string{"ns/web-1.eu"}, Unchanged: []string{"ns/web-0.eu", "ns/web-2.eu"}})

	// Targets outside the selector are not pruned, even of the owner.
	if diff := cmp.Diff([]string{"ns/web-0.eu", "ns/web-1.eu", "ns/web-2.eu"}, listNames(t, c, "ns")); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	narrow := client.TargetSet{Owner: "ctl/a", Selector: map[string]string{"tier": "front"}, Targets: nil}
	mustApply(t, c, narrow, result{Deleted: []string{"ns/web-0.eu"}})
	waitGone(t, c, "ns/web-0.eu")
	if diff := cmp.Diff([]string{"ns/web-1.eu", "ns/web-2.eu"}, listNames(t, c, "ns")); diff != "" {
		t.Errorf("targets after pruning tier=front (-want +got):\n%s", diff)
	}

	// A new probed over the same store has the namespaced names and their
	// owner, and the same set changes nothing there.
	s.Stop()
	s2 := probedtest.Start(t, probedtest.Options{Store: s.Store})
	c2 := dial(t, s2.Addr)
	if diff := cmp.Diff([]string{"ns/web-1.eu", "ns/web-2.eu"}, listNames(t, c2, "ns")); diff != "" {
		t.Errorf("targets after a restart (-want +got):\n%s", diff)
	}
	set.Targets = []*probev1.Target{member("ns/web-1.eu"), member("ns/web-2.eu")}
	mustApply(t, c2, set, result{Unchanged: []string{"ns/web-1.eu", "ns/web-2.eu"}})
}

func waitGone(t *testing.T, c *client.Client, name string) {
	t.Helper()
	for ev := range c.Watch(t.Context(), client.WithNames(name)) {
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
		if ev.SnapshotComplete && len(ev.Events) == 0 {
			return
		}
		for _, e := range ev.Events {
			if e.GetKind() == probev1.EventKind_EVENT_KIND_DELETED {
				return
			}
		}
	}
}

func applyDryRun(t *testing.T, k teststore.Kind) {
	_, c := startOver(t, k, probedtest.Options{})
	set := client.TargetSet{Owner: "ctl", Selector: sel, Targets: []*probev1.Target{member("a"), member("b")}}
	before := mustApply(t, c, set, result{Created: []string{"a", "b"}})
	set.Targets = []*probev1.Target{member("a", "x", "y"), member("c")}
	set.DryRun = true
	dry := mustApply(t, c, set, result{Created: []string{"c"}, Updated: []string{"a"}, Deleted: []string{"b"}})
	if !dry.GetDryRun() || dry.GetRevision() != before.GetRevision() {
		t.Errorf("dry run: dry_run %v, revision %d; want true and %d", dry.GetDryRun(), dry.GetRevision(), before.GetRevision())
	}
	if diff := cmp.Diff([]string{"a", "b"}, listNames(t, c, "")); diff != "" {
		t.Errorf("targets after a dry run (-want +got):\n%s", diff)
	}
	if got, _ := c.Get(t.Context(), "a"); got.GetLabels()["x"] != "" {
		t.Errorf("a dry run updated a: labels %v", got.GetLabels())
	}
}

func applyConflicts(t *testing.T, k teststore.Kind) {
	ctx := t.Context()
	_, c := startOver(t, k, probedtest.Options{})
	if _, err := c.Create(ctx, member("plain")); err != nil {
		t.Fatal(err)
	}
	mustApply(t, c, client.TargetSet{Owner: "other", Selector: sel, Targets: []*probev1.Target{member("theirs")}}, result{Created: []string{"theirs"}})
	set := client.TargetSet{Owner: "mine", Selector: sel, Targets: []*probev1.Target{member("plain", "x", "1"), member("theirs", "x", "1"), member("mine")}}
	resp := mustApply(t, c, set, result{Created: []string{"mine"}, Conflicts: []string{"plain", "theirs"}})
	for _, cf := range resp.GetConflicts() {
		if cf.GetMessage() == "" {
			t.Errorf("conflict %s without a message", cf.GetName())
		}
	}
	// Not taken over, not changed; and the owner "mine" prunes neither.
	for name, owner := range map[string]string{"plain": "", "theirs": "other"} {
		got, err := c.Get(ctx, name)
		if err != nil || got.GetOwner() != owner || got.GetLabels()["x"] != "" {
			t.Errorf("%s: owner %q labels %v (%v); want owner %q, unchanged", name, got.GetOwner(), got.GetLabels(), err, owner)
		}
	}
	mustApply(t, c, client.TargetSet{Owner: "mine", Selector: sel}, result{Deleted: []string{"mine"}})
	if diff := cmp.Diff([]string{"plain", "theirs"}, slices.DeleteFunc(listNames(t, c, ""), func(n string) bool { return n == "mine" })); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
}

func applyKeepsProbes(t *testing.T, k teststore.Kind) {
	ctx := t.Context()
	_, c := startOver(t, k, probedtest.Options{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	port := int32(lis.Addr().(*net.TCPAddr).Port)
	probed := func(extra ...string) *probev1.Target {
		tg := member("ns/probed", extra...)
		tg.ReadinessProbe = &probev1.Probe{PeriodSeconds: 1, Handler: &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: port}}}
		return tg
	}
	set := client.TargetSet{Owner: "o", Selector: sel, Targets: []*probev1.Target{probed()}}
	mustApply(t, c, set, result{Created: []string{"ns/probed"}})
	ready, err := c.WaitReady(ctx, "ns/probed")
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, c, set, result{Unchanged: []string{"ns/probed"}})
	same, err := c.Get(ctx, "ns/probed")
	if err != nil || same.GetStatus().GetRevision() != ready.GetStatus().GetRevision() {
		t.Fatalf("after the same set: revision %d (%v), was %d", same.GetStatus().GetRevision(), err, ready.GetStatus().GetRevision())
	}
	set.Targets = []*probev1.Target{probed("tier", "front")}
	mustApply(t, c, set, result{Updated: []string{"ns/probed"}})
	updated, err := c.Get(ctx, "ns/probed")
	if err != nil {
		t.Fatal(err)
	}
	if r := updated.GetStatus().GetReadiness(); !updated.GetStatus().GetReady() || !r.GetHasInitialized() ||
		!r.GetLastTransitionTime().AsTime().Equal(ready.GetStatus().GetReadiness().GetLastTransitionTime().AsTime()) {
		t.Errorf("after an update of labels the readiness probe restarted: ready %v, %v", updated.GetStatus().GetReady(), r)
	}
}

func applyTenThousand(t *testing.T, k teststore.Kind) {
	if testing.Short() {
		t.Skip("10,000 targets")
	}
	_, c := startOver(t, k, probedtest.Options{})
	const n = 10_000
	set := client.TargetSet{Owner: "k8s/cluster", Selector: sel}
	var want []string
	for i := range n {
		name := fmt.Sprintf("big/pod-%05d.replicaset-with-a-long-name-as-kubernetes-makes-them", i)
		set.Targets = append(set.Targets, member(name))
		want = append(want, name)
	}
	// A watcher following live events sees every creation: the call's
	// 10,000 events, published at once, may exceed its buffer (it is then
	// ended as too slow and resumes from the history by itself).
	wctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := c.Watch(wctx, client.WithNamespace("big"), client.WithKinds(probev1.EventKind_EVENT_KIND_CREATED))
	for ev := range events {
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
		if ev.SnapshotComplete {
			break
		}
	}
	resp := mustApply(t, c, set, result{Created: want})
	seen := 0
	for ev := range events {
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
		seen += len(ev.Events)
		if ev.Revision >= resp.GetRevision() {
			break
		}
	}
	if seen != n {
		t.Errorf("the watcher saw %d creations, want %d", seen, n)
	}
	if got := listNames(t, c, "big"); len(got) != n {
		t.Fatalf("%d targets listed, want %d", len(got), n)
	}
	mustApply(t, c, set, result{Unchanged: want})
}

// TestApplyTargetsOneRun: over bbolt, the events of one ApplyTargets are
// one contiguous run in Watch, even while other clients create targets at
// the same time.
func TestApplyTargetsOneRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, c := startOver(t, teststore.Bolt, probedtest.Options{})
	mustApply(t, c, client.TargetSet{Owner: "o", Selector: sel, Targets: []*probev1.Target{member("old-0"), member("old-1")}}, result{Created: []string{"old-0", "old-1"}})
	from, err := c.Get(ctx, "old-1")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Create(ctx, plain(fmt.Sprintf("other-%d-%d", g, i), nil)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var set client.TargetSet
	set.Owner, set.Selector = "o", sel
	var want []string
	for i := range 1000 {
		set.Targets = append(set.Targets, member(fmt.Sprintf("new-%04d", i)))
		want = append(want, fmt.Sprintf("new-%04d", i))
	}
	resp := mustApply(t, c, set, result{Created: want, Deleted: []string{"old-0", "old-1"}})
	close(stop)
	wg.Wait()

	// Every event of the call (CREATED of new-*, TERMINATING of old-*)
	// between the first and the last is the call's.
	ours := func(e *probev1.Event) bool {
		k := e.GetKind()
		return (k == probev1.EventKind_EVENT_KIND_CREATED && len(e.GetName()) > 4 && e.GetName()[:4] == "new-") ||
			k == probev1.EventKind_EVENT_KIND_TERMINATING || (k == probev1.EventKind_EVENT_KIND_TRANSITION && e.GetName()[:4] == "old-")
	}
	var run []bool
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for ev := range c.Watch(wctx, client.WithSince(from.GetStatus().GetRevision()+1)) {
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
		for _, e := range ev.Events {
			if e.GetKind() == probev1.EventKind_EVENT_KIND_DELETED {
				continue // a drain's end, later
			}
			run = append(run, ours(e))
		}
		if ev.Revision >= resp.GetRevision() {
			break
		}
	}
	first, last := slices.Index(run, true), -1
	for i, ok := range run {
		if ok {
			last = i
		}
	}
	for i := first; i <= last; i++ {
		if !run[i] {
			t.Fatalf("event %d of %d between the call's first (%d) and last (%d) is another's", i, len(run), first, last)
		}
	}
	if n := last - first + 1; n < 1002 {
		t.Errorf("%d events of the call, want at least 1002", n)
	}
}
