package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server"
)

// TestCallsReachTheOwner: on a replica that does not own a target, the
// calls that change it are forwarded to its owner, and answer as the
// owner does; reads answer from the replica's own view.
func TestCallsReachTheOwner(t *testing.T) {
	rs := probedtest.StartReplicas(t, 2, probedtest.Options{})
	b := probedtest.NewBackend(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r0 := api(rs.Servers[0])

	// r1-web is owned by replica 1; every call goes to replica 0.
	created, err := r0.CreateTarget(ctx, &probev1.CreateTargetRequest{Target: b.Readiness("r1-web")})
	if err != nil {
		t.Fatalf("CreateTarget: %v", err)
	}
	if created.GetTarget().GetName() != "r1-web" {
		t.Fatalf("CreateTarget returned %v", created.GetTarget())
	}
	labelled := b.Readiness("r1-web")
	labelled.Labels = map[string]string{"team": "blue"}
	updated, err := r0.UpdateTarget(ctx, &probev1.UpdateTargetRequest{Target: labelled})
	if err != nil || updated.GetTarget().GetLabels()["team"] != "blue" {
		t.Fatalf("UpdateTarget through a replica that does not own it = %v, %v; want the owner's answer", updated.GetTarget(), err)
	}
	triggered, err := r0.TriggerProbe(ctx, &probev1.TriggerProbeRequest{Name: "r1-web", ProbeType: probev1.ProbeType_PROBE_TYPE_READINESS})
	if err != nil || triggered.GetOutcome().GetResult() != probev1.Result_RESULT_SUCCESS {
		t.Fatalf("TriggerProbe = %v, %v; want the owner's run, a success", triggered.GetOutcome(), err)
	}
	if _, err := r0.ResetTarget(ctx, &probev1.ResetTargetRequest{Name: "r1-web"}); err != nil {
		t.Fatalf("ResetTarget: %v", err)
	}
	// Only the owner probed: replica 0 schedules nothing.
	if got := rs.Servers[0].Engine.Stats().Wheel.Scheduled; got != 0 {
		t.Errorf("replica 0 schedules %d probes of a target it does not own", got)
	}
	deleted, err := r0.DeleteTarget(ctx, &probev1.DeleteTargetRequest{Name: "r1-web"})
	if err != nil || deleted.GetTarget().GetStatus().GetPhase() != probev1.Phase_PHASE_TERMINATING {
		t.Fatalf("DeleteTarget = %v, %v; want terminating", deleted.GetTarget(), err)
	}
	poll.Until(t, "the deleted target gone from replica 0", 20*time.Second, func() bool {
		_, err := r0.GetTarget(ctx, &probev1.GetTargetRequest{Name: "r1-web"})
		return status.Code(err) == codes.NotFound
	})
}

// TestForwardedOnce: a forwarded call that finds the target owned
// elsewhere again (ownership moved meanwhile) is not forwarded a second
// time: it is Unavailable with a RetryInfo, and the client retries.
func TestForwardedOnce(t *testing.T) {
	rs := probedtest.StartReplicas(t, 2, probedtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := api(rs.Servers[0]).CreateTarget(ctx, &probev1.CreateTargetRequest{Target: &probev1.Target{Name: "r0-web"}}); err != nil {
		t.Fatal(err)
	}
	// As if replica 0 had forwarded it to replica 1, which does not own it.
	fwd := metadata.AppendToOutgoingContext(ctx, server.MetadataForwardedBy, "r0")
	var st *status.Status
	poll.Until(t, "r0-web in replica 1's view", 20*time.Second, func() bool {
		_, err := api(rs.Servers[1]).ResetTarget(fwd, &probev1.ResetTargetRequest{Name: "r0-web"})
		st = status.Convert(err)
		return st.Code() != codes.NotFound
	})
	if st.Code() != codes.Unavailable {
		t.Fatalf("second hop = %v, want Unavailable", st.Err())
	}
	var retry bool
	for _, d := range st.Details() {
		_, ok := d.(*errdetails.RetryInfo)
		retry = retry || ok
	}
	if !retry {
		t.Errorf("Unavailable without a RetryInfo: %v", st.Details())
	}
}

// TestCallRunsWhereItsShardWasJustClaimed: a call that reaches the
// replica which has just claimed the target's shard — its view of the
// cluster has the claim, its engine has not applied it yet — runs there
// once the engine has, instead of failing as ownerless. Each round moves
// the shard and calls the new owner at once, so that some calls find the
// engine behind.
func TestCallRunsWhereItsShardWasJustClaimed(t *testing.T) {
	rs := probedtest.StartReplicas(t, 2, probedtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := api(rs.Servers[1]).CreateTarget(ctx, &probev1.CreateTargetRequest{Target: &probev1.Target{Name: "r1-web"}}); err != nil {
		t.Fatal(err)
	}
	for round := range 40 {
		to := round % 2
		rs.Move(1, to)
		if _, err := api(rs.Servers[to]).ResetTarget(ctx, &probev1.ResetTargetRequest{Name: "r1-web"}); err != nil {
			t.Fatalf("round %d: ResetTarget on replica %d right after it claimed the shard = %v, want it run there", round, to, err)
		}
	}
}
