package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/storetest"
)

// TestCreateRace: two replicas create the same names at once; etcd
// decides: for each name exactly one create succeeds and the other is
// refused as AlreadyExists, and what is stored is the winner's.
func TestCreateRace(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	a := open(t, cli, etcd.Options{ReplicaID: "a"})
	b := open(t, cli, etcd.Options{ReplicaID: "b"})
	const names = 20
	won := make([][]string, 2)
	var wg sync.WaitGroup
	for i, s := range []*etcd.Store{a, b} {
		wg.Go(func() {
			for n := range names {
				c := create(fmt.Sprintf("t%02d", n))
				c.Target.Status.Client = s.ReplicaID()
				err := s.Commit(t.Context(), []*engine.Change{c})
				switch why := conflictReason(err, c.Name); {
				case err == nil:
					won[i] = append(won[i], c.Name)
				case !errors.Is(why, engine.ErrAlreadyExists):
					t.Errorf("replica %s: Commit(create %s) = %v, want nil or a conflict wrapping ErrAlreadyExists", s.ReplicaID(), c.Name, err)
				}
			}
		})
	}
	wg.Wait()
	if got := len(won[0]) + len(won[1]); got != names {
		t.Fatalf("%d creates succeeded (a %v, b %v), want %d: one per name", got, won[0], won[1], names)
	}
	st := load(t, a)
	if len(st.Targets) != names {
		t.Fatalf("Load: %d targets, want %d", len(st.Targets), names)
	}
	winner := map[string]string{}
	for i, r := range []string{"a", "b"} {
		for _, n := range won[i] {
			winner[n] = r
		}
	}
	for _, tg := range st.Targets {
		if tg.Status.Client != winner[tg.Spec.Name] {
			t.Errorf("target %s stored by %q, want the winner %q's", tg.Spec.Name, tg.Status.Client, winner[tg.Spec.Name])
		}
	}
	if created := countKind(st.Events, engine.KindCreated); created != names {
		t.Errorf("%d CREATED events, want %d", created, names)
	}
}

// conflictReason is the reason err gives for refusing name, nil if it is
// no *engine.ConflictError (or does not name it).
func conflictReason(err error, name string) error {
	var conflict *engine.ConflictError
	if !errors.As(err, &conflict) {
		return nil
	}
	return conflict.Refused[name]
}

func countKind(events []engine.Event, kind engine.EventKind) int {
	n := 0
	for _, ev := range events {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// claim puts the shard key of shard s of a cluster of one shard on a
// lease of its own, as another replica's claim does.
func claim(t *testing.T, cli *clientv3.Client, id string) {
	t.Helper()
	g, err := cli.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(t.Context(), keyspace.New("", 1).Shard(0), id, clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
}

// TestFencedWrites: a replica writes a target while its shard key is on
// its lease; once the key moved to another lease (another replica claimed
// it), its writes are refused as ErrOwnershipLost and write nothing; a
// replica whose log shows it lost the shard is refused without a round
// trip. Creates are not fenced.
func TestFencedWrites(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	_, opts := member(t, cli, "", 1, "a", 0)
	s := open(t, cli, opts)
	load(t, s) // the store reads its ownership
	c := create("web")
	commit(t, s, c)
	tr := transition(c, 1)
	commit(t, s, tr)

	claim(t, cli, "b") // another replica's, behind a's back
	before := currentRevision(t, cli)
	err := s.Commit(t.Context(), []*engine.Change{transition(tr, 2), create("db")})
	reasons := refusals(t, err)
	if !errors.Is(reasons["web"], engine.ErrOwnershipLost) || len(reasons) != 1 {
		t.Errorf("Commit after the shard moved = %v, want web refused with ErrOwnershipLost, and only web", reasons)
	}
	if rev := currentRevision(t, cli); rev != before {
		t.Errorf("the refused transaction moved etcd from revision %d to %d: it wrote", before, rev)
	}
	commit(t, s, create("db")) // the create alone goes through

	load(t, s) // the store's log shows the loss
	before = currentRevision(t, cli)
	err = s.Commit(t.Context(), []*engine.Change{transition(tr, 3)})
	if why := refusals(t, err)["web"]; !errors.Is(why, engine.ErrOwnershipLost) {
		t.Errorf("Commit of a target the log says is not owned: %v, want ErrOwnershipLost", why)
	}
	if rev := currentRevision(t, cli); rev != before {
		t.Errorf("a change of a target the log says is not owned reached etcd (revision %d to %d)", before, rev)
	}

	st := load(t, s)
	if n := countKind(st.Events, engine.KindTransition); n != 1 {
		t.Errorf("%d transitions stored, want 1 (the one before the shard moved)", n)
	}
}

// TestConflictNamesEach: one refused transaction names every refused
// target with its reason, and the others are not named.
func TestConflictNamesEach(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	_, opts := member(t, cli, "", 1, "a", 0)
	s := open(t, cli, opts)
	load(t, s)
	web, db := create("web"), create("db")
	commit(t, s, web, db)
	claim(t, cli, "b")
	err := s.Commit(t.Context(), []*engine.Change{create("web"), transition(db, 1), create("new")})
	reasons := refusals(t, err)
	if !errors.Is(reasons["web"], engine.ErrAlreadyExists) || !errors.Is(reasons["db"], engine.ErrOwnershipLost) || len(reasons) != 2 {
		t.Errorf("refused %v, want web AlreadyExists and db OwnershipLost", reasons)
	}
	if st := load(t, s); len(st.Targets) != 2 {
		t.Errorf("%d targets after a refused transaction, want 2", len(st.Targets))
	}
}

// TestBatchFolding: the changes of one target in a transaction are folded
// into one write per key (etcd takes one operation per key); a create
// after a delete of the same name in one transaction needs no compare;
// two creates of one name in one transaction are refused.
func TestBatchFolding(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	s := open(t, cli, etcd.Options{ReplicaID: "a"})
	c := create("web")
	commit(t, s, c, transition(c, 1), storetest.Terminate(c.Target, at(2)))
	again := create("web")
	commit(t, s, storetest.Delete("web", at(3)), again, transition(again, 1))
	st := load(t, s)
	if len(st.Targets) != 1 || st.Targets[0].Status.Phase != engine.Active || st.Targets[0].Status.Probes[probe.Readiness].Result != probe.Success {
		t.Errorf("Load().Targets = %+v, want web re-created, active, its last status", st.Targets)
	}
	if len(st.Events) != 6 {
		t.Errorf("%d events, want 6", len(st.Events))
	}
	err := s.Commit(t.Context(), []*engine.Change{create("x"), create("x")})
	if why := refusals(t, err)["x"]; !errors.Is(why, engine.ErrAlreadyExists) {
		t.Errorf("two creates of x in one transaction: %v, want ErrAlreadyExists", why)
	}
}

// TestLostAnswerAppliedOnce: a transaction applied whose answer was lost
// (a timeout after it was sent) is found applied by the retry: the Commit
// succeeds with its revision, the create is not refused as existing, and
// the history has it once.
func TestLostAnswerAppliedOnce(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	s, kv, _ := openLossy(t, c, true)
	kv.lose(applied, applied)
	web := create("web")
	commit(t, s, web)
	tr := transition(web, 1)
	commit(t, s, tr)
	if kv.sent != 5 { // with Open's
		t.Errorf("%d transactions sent, want 4 (each lost once, then found applied)", kv.sent)
	}
	st := load(t, open(t, c.Client(t), etcd.Options{ReplicaID: "b"}))
	if len(st.Events) != 2 || st.Events[0].Revision != web.Event.Revision || st.Events[1].Revision != tr.Event.Revision {
		t.Errorf("history %v, want the create at %d and the transition at %d, once each", revisions(st.Events), web.Event.Revision, tr.Event.Revision)
	}
}

// TestLateDuplicateRefused: a transaction whose answer was lost and which
// etcd applies only after the retry succeeded (a request delivered late)
// is refused by etcd: a transaction is never applied twice.
func TestLateDuplicateRefused(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	s, kv, _ := openLossy(t, c, true)
	kv.lose(heldBack)
	web := create("web")
	tr := transition(web, 1)
	commit(t, s, web, tr)
	late, err := kv.applyHeld(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(late) != 1 || late[0].Succeeded {
		t.Fatalf("the late duplicate: %d answers, succeeded %v; want it refused", len(late), len(late) == 1 && late[0].Succeeded)
	}
	commit(t, s, transition(tr, 2))
	st := load(t, s)
	if len(st.Events) != 3 {
		t.Errorf("history %v, want 3 events: the duplicate wrote nothing", revisions(st.Events))
	}
}

func revisions(events []engine.Event) []uint64 {
	out := make([]uint64, len(events))
	for i, ev := range events {
		out[i] = ev.Revision
	}
	return out
}

// TestTooLarge: a change larger than etcd takes is refused with
// ErrResourceExhausted, and the store goes on.
func TestTooLarge(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	s := open(t, cli, etcd.Options{ReplicaID: "a"})
	big := createWeb("big")
	big.Target.Spec.Labels = map[string]string{"blob": strings.Repeat("x", 2<<20)}
	err := s.Commit(t.Context(), []*engine.Change{big})
	if why := refusals(t, err)["big"]; !errors.Is(why, engine.ErrResourceExhausted) {
		t.Fatalf("Commit of a 2 MiB change: %v, want ErrResourceExhausted", why)
	}
	commit(t, s, create("small"))
	if st := load(t, s); len(st.Targets) != 1 {
		t.Errorf("%d targets, want 1", len(st.Targets))
	}
}

// TestInvalidChange: a change Commit cannot write fails the Commit before
// anything is sent.
func TestInvalidChange(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	s := open(t, cli, etcd.Options{ReplicaID: "a"})
	noSpec := create("x")
	noSpec.SpecChanged = false
	for _, tc := range []struct {
		name   string
		change *engine.Change
		want   string
	}{
		{"NoName", &engine.Change{Delete: true}, "no target name"},
		{"NoTarget", &engine.Change{Name: "x"}, "no Target"},
		{"NoSpec", &engine.Change{Name: "x", Target: &engine.Target{}}, "no Spec"},
		{"OtherName", &engine.Change{Name: "x", SpecChanged: true, Target: &engine.Target{Spec: storetest.BareSpec("y")}}, `named "y"`},
		{"CreateWithoutSpec", noSpec, "without its spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := currentRevision(t, cli)
			err := s.Commit(t.Context(), []*engine.Change{create("ok"), tc.change})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Commit = %v, want an error saying %q", err, tc.want)
			}
			if rev := currentRevision(t, cli); rev != before {
				t.Errorf("a failed Commit wrote (revision %d to %d)", before, rev)
			}
		})
	}
	too := make([]*engine.Change, etcd.MaxBatch+1)
	for i := range too {
		too[i] = create(fmt.Sprint(i))
	}
	if err := s.Commit(t.Context(), too); err == nil {
		t.Errorf("Commit of %d changes = nil, want an error", len(too))
	}
}

// TestCloseEndsRetries: Close ends a Commit retrying against an etcd that
// does not answer, with ErrClosed.
func TestCloseEndsRetries(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	s, kv, clock := openLossy(t, c, false)
	kv.lose(heldBack) // then the store waits on its clock, which does not move
	done := make(chan error, 1)
	go func() { done <- s.Commit(context.Background(), []*engine.Change{create("web")}) }()
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil { // the backoff
		t.Fatal(err)
	}
	_ = s.Close()
	select {
	case err := <-done:
		if !errors.Is(err, etcd.ErrClosed) {
			t.Errorf("Commit after Close = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Commit did not return within 10s of Close")
	}
}
