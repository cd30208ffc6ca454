package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/client"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/teststore"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestAPIOverStores: the API behaves the same over bbolt (one probed) and
// over etcd (cluster mode's store, here one replica): what a store decides
// (AlreadyExists, NotFound, which of two racing writes wins), revisions
// and Watch from one, restart from what is stored, probing through the
// API. Every etcd case shares one embedded etcd, each under its own
// prefix.
func TestAPIOverStores(t *testing.T) {
	t.Parallel()
	overStores(t, []storeCase{
		{"create get list update delete, then a restart", storeCRUD},
		{"AlreadyExists and NotFound", storeErrors},
		{"racing creates of one name: one wins", storeRacingCreates},
		{"racing updates and a delete", storeRacingUpdateDelete},
		{"watch from a revision", storeWatchSince},
		{"watch from a compacted revision is OutOfRange", storeWatchCompacted},
		{"trigger and reset", storeTriggerReset},
	})
}

// storeCase is a test run over each kind of store.
type storeCase struct {
	name string
	run  func(t *testing.T, k teststore.Kind)
}

// overStores runs every case, in parallel, over each kind of store.
func overStores(t *testing.T, cases []storeCase) {
	t.Helper()
	for _, k := range teststore.Kinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, k)
				})
			}
		})
	}
}

// startOver starts a probed over a new store of kind k.
func startOver(t *testing.T, k teststore.Kind, opts probedtest.Options) (*probedtest.Server, *client.Client) {
	t.Helper()
	opts.Store = teststore.Open(t, k)
	return start(t, opts)
}

func storeCRUD(t *testing.T, k teststore.Kind) {
	ctx := t.Context()
	s, c := startOver(t, k, probedtest.Options{})
	created, err := c.Create(ctx, plain("web", map[string]string{"app": "web"}))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	rev := created.GetStatus().GetRevision()
	if rev == 0 || !created.GetStatus().GetReady() {
		t.Fatalf("Create = %v, want ready at a revision", created.GetStatus())
	}
	if _, err := c.Create(ctx, lingering(plain("db", map[string]string{"app": "db"}))); err != nil {
		t.Fatalf("Create db: %v", err)
	}
	got, err := c.Get(ctx, "web")
	if err != nil || got.GetLabels()["app"] != "web" || got.GetStatus().GetRevision() != rev {
		t.Fatalf("Get = %v, %v; want web at revision %d", got, err, rev)
	}
	updated, err := c.Update(ctx, plain("web", map[string]string{"app": "web", "tier": "front"}))
	if err != nil || updated.GetLabels()["tier"] != "front" || updated.GetStatus().GetRevision() <= rev {
		t.Fatalf("Update = %v, %v; want tier=front after revision %d", updated, err, rev)
	}
	if !updated.GetStatus().GetCreateTime().AsTime().Equal(created.GetStatus().GetCreateTime().AsTime()) {
		t.Errorf("Update changed the create time: %v, was %v", updated.GetStatus().GetCreateTime(), created.GetStatus().GetCreateTime())
	}
	list, _, err := c.List(ctx, client.ListOptions{Labels: map[string]string{"tier": "front"}})
	if err != nil || len(list) != 1 || list[0].GetName() != "web" {
		t.Fatalf("List tier=front = %v, %v; want web", list, err)
	}
	deleted, err := c.Delete(ctx, "db")
	if err != nil || deleted.GetStatus().GetPhase() != probev1.Phase_PHASE_TERMINATING {
		t.Fatalf("Delete db = %v, %v; want TERMINATING (preStop sleep)", deleted, err)
	}

	// A new probed over the same store serves what was written.
	s.Stop()
	s2 := probedtest.Start(t, probedtest.Options{Store: s.Store})
	c2 := dial(t, s2.Addr)
	all, err := c2.ListAll(ctx, nil)
	if err != nil {
		t.Fatalf("ListAll after restart: %v", err)
	}
	byName := make(map[string]*probev1.Target)
	for _, tg := range all {
		byName[tg.GetName()] = tg
	}
	if len(all) != 2 || byName["web"].GetLabels()["tier"] != "front" || byName["db"].GetStatus().GetPhase() != probev1.Phase_PHASE_TERMINATING {
		t.Fatalf("after restart: %v, want web (tier=front) and db (TERMINATING)", all)
	}
}

func storeErrors(t *testing.T, k teststore.Kind) {
	ctx := t.Context()
	_, c := startOver(t, k, probedtest.Options{})
	if _, err := c.Create(ctx, plain("exists", nil)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
		is   error
		code codes.Code
	}{
		{"create existing", func() error { _, err := c.Create(ctx, plain("exists", nil)); return err }, client.ErrAlreadyExists, codes.AlreadyExists},
		{"get missing", func() error { _, err := c.Get(ctx, "nope"); return err }, client.ErrNotFound, codes.NotFound},
		{"update missing", func() error { _, err := c.Update(ctx, plain("nope", nil)); return err }, client.ErrNotFound, codes.NotFound},
		{"delete missing", func() error { _, err := c.Delete(ctx, "nope"); return err }, client.ErrNotFound, codes.NotFound},
		{"reset missing", func() error { _, err := c.Reset(ctx, "nope"); return err }, client.ErrNotFound, codes.NotFound},
		{"trigger missing", func() error {
			_, err := c.Trigger(ctx, "nope", probev1.ProbeType_PROBE_TYPE_READINESS)
			return err
		}, client.ErrNotFound, codes.NotFound},
	}
	for _, tt := range tests {
		err := tt.call()
		if !errors.Is(err, tt.is) || status.Code(err) != tt.code {
			t.Errorf("%s: error %v (%v), want %v", tt.name, err, status.Code(err), tt.code)
		}
	}
}

// storeRacingCreates: creates of one name race on one probed: exactly
// one succeeds, every other is AlreadyExists, and the target is whole.
func storeRacingCreates(t *testing.T, k teststore.Kind) {
	ctx := t.Context()
	_, c := startOver(t, k, probedtest.Options{})
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = c.Create(ctx, plain("once", map[string]string{"by": fmt.Sprint(i)}))
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("creates %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, client.ErrAlreadyExists):
			t.Errorf("create %d: %v, want AlreadyExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no create succeeded: %v", errs)
	}
	got, err := c.Get(ctx, "once")
	if err != nil || got.GetLabels()["by"] != fmt.Sprint(winner) {
		t.Fatalf("Get = %v, %v; want the winner's (by=%d)", got, err, winner)
	}
}

// storeRacingUpdateDelete: updates race a delete of the same target:
// each update either lands before the delete or is NotFound after it,
// and the target ends deleted.
func storeRacingUpdateDelete(t *testing.T, k teststore.Kind) {
	ctx := t.Context()
	_, c := startOver(t, k, probedtest.Options{})
	if _, err := c.Create(ctx, plain("contested", nil)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = c.Update(ctx, plain("contested", map[string]string{"v": fmt.Sprint(i)}))
		})
	}
	var delErr error
	wg.Go(func() { _, delErr = c.Delete(ctx, "contested") })
	wg.Wait()
	// A target without preStop is removed at once; Delete may then
	// answer NotFound when it reads it back.
	if delErr != nil && !errors.Is(delErr, client.ErrNotFound) {
		t.Fatalf("Delete: %v", delErr)
	}
	for i, err := range errs {
		if err != nil && !errors.Is(err, client.ErrNotFound) && !errors.Is(err, client.ErrFailedPrecondition) {
			t.Errorf("update %d: %v, want success or NotFound", i, err)
		}
	}
	// It is gone or on its way out (removal follows at once).
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := c.Watch(watchCtx, client.WithNames("contested"))
	_, snap := recvSnapshot(t, ch)
	if len(snap) == 0 {
		return
	}
	if ph := snap[0].GetTarget().GetStatus().GetPhase(); ph != probev1.Phase_PHASE_TERMINATING {
		t.Fatalf("after the delete: %v, want TERMINATING or gone", snap)
	}
	for {
		evs := recvEvents(t, ch, 1)
		if evs[0].GetKind() == probev1.EventKind_EVENT_KIND_DELETED {
			return
		}
	}
}

func storeWatchSince(t *testing.T, k teststore.Kind) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, c := startOver(t, k, probedtest.Options{})
	var revs []uint64
	for _, n := range []string{"a", "b", "c"} {
		tg, err := c.Create(ctx, plain(n, nil))
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, tg.GetStatus().GetRevision())
	}
	if !slices.IsSorted(revs) || revs[0] == revs[1] || revs[1] == revs[2] {
		t.Fatalf("revisions %v, want increasing", revs)
	}
	// From b's revision: b, c, then live events.
	ch := c.Watch(ctx, client.WithSince(revs[1]))
	evs := recvEvents(t, ch, 2)
	if got := names(evs); !slices.Equal(got, []string{"b", "c"}) || evs[0].GetRevision() != revs[1] || evs[1].GetRevision() != revs[2] {
		t.Fatalf("replay %v, want CREATED b at %d and c at %d", evs, revs[1], revs[2])
	}
	d, err := c.Create(ctx, plain("d", nil))
	if err != nil {
		t.Fatal(err)
	}
	evs = recvEvents(t, ch, 1)
	if evs[0].GetName() != "d" || evs[0].GetRevision() != d.GetStatus().GetRevision() {
		t.Fatalf("live %v, want CREATED d at %d", evs, d.GetStatus().GetRevision())
	}
}

// storeWatchCompacted: a revision the history no longer holds is
// OutOfRange naming the oldest one a watch can start from, and a watch
// from that one replays the rest.
func storeWatchCompacted(t *testing.T, k teststore.Kind) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s, c := startOver(t, k, probedtest.Options{Engine: engine.Options{History: 5}})
	var last uint64
	for i := range 12 {
		tg, err := c.Create(ctx, plain(fmt.Sprintf("t-%02d", i), nil))
		if err != nil {
			t.Fatal(err)
		}
		last = tg.GetStatus().GetRevision()
	}
	stream, err := probev1.NewProbeServiceClient(s.Conn).Watch(ctx, &probev1.WatchRequest{SinceRevision: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	st := status.Convert(err)
	if st.Code() != codes.OutOfRange {
		t.Fatalf("Watch since 1: %v, want OutOfRange", err)
	}
	var oldest string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			oldest = info.GetMetadata()["oldest_revision"]
		}
	}
	var from uint64
	if _, err := fmt.Sscan(oldest, &from); err != nil || from <= 1 || from > last {
		t.Fatalf("oldest_revision %q (%v), want one in (1, %d]", oldest, st.Details(), last)
	}
	ch := c.Watch(ctx, client.WithSince(from))
	r := recv(t, ch)
	if r.Err != nil || r.Resynced || len(r.Events) == 0 || r.Events[0].GetRevision() < from || r.Events[len(r.Events)-1].GetRevision() > last {
		t.Fatalf("watch from the oldest revision %d: %+v, want a replay up to %d", from, r, last)
	}
}

func storeTriggerReset(t *testing.T, k teststore.Kind) {
	ctx := t.Context()
	_, c := startOver(t, k, probedtest.Options{})
	b := probedtest.NewBackend(t, false)
	created, err := c.Create(ctx, b.Readiness("db"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Trigger(ctx, "db", probev1.ProbeType_PROBE_TYPE_READINESS)
	if err != nil || resp.GetOutcome().GetResult() != probev1.Result_RESULT_FAILURE {
		t.Fatalf("Trigger = %v, %v; want a failure (503)", resp.GetOutcome(), err)
	}
	b.SetHealthy(true)
	resp, err = c.Trigger(ctx, "db", probev1.ProbeType_PROBE_TYPE_READINESS)
	if err != nil || resp.GetOutcome().GetResult() != probev1.Result_RESULT_SUCCESS {
		t.Fatalf("Trigger = %v, %v; want a success", resp.GetOutcome(), err)
	}
	reset, err := c.Reset(ctx, "db")
	if err != nil || reset.GetStatus().GetRevision() <= created.GetStatus().GetRevision() {
		t.Fatalf("Reset = %v, %v; want a newer revision than %d", reset.GetStatus(), err, created.GetStatus().GetRevision())
	}
}
