package server

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/target"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// ApplyTargets makes one owner's set the desired list the client streams;
// see the proto for the contract. Nothing is applied before the client
// closes its side: a stream that breaks first changes nothing. Each
// message is checked as it arrives (receiveSet): a caller who may write
// no target at all is refused before its first message is read, one
// that names a target it may not write or an invalid one at that
// message, and the set is bounded in bytes, in time and in calls open
// per identity. In cluster mode the updates and prunes of targets
// another replica probes are forwarded to it (UpdateTarget,
// DeleteTarget, as the caller), the updates beside this replica's own
// writes, the prunes after them.
func (s *Server) ApplyTargets(stream grpc.ClientStreamingServer[probev1.ApplyTargetsRequest, probev1.ApplyTargetsResponse]) error {
	ctx := stream.Context()
	if !s.allowedAny(ctx, VerbWrite) {
		return status.Error(codes.PermissionDenied, fmt.Sprintf("%q may not write any target (--authz-policy): ApplyTargets refused", engine.ClientFrom(ctx)))
	}
	release, err := s.applies.take(engine.ClientFrom(ctx), s.opts.MaxAppliesPerClient)
	if err != nil {
		return err
	}
	defer release()
	set, err := s.receiveSet(ctx, stream)
	if err != nil {
		return err
	}
	s.limitPruning(ctx, &set)
	set.Forward = setForwarder{s}
	res, err := s.engine.Apply(ctx, set)
	if err != nil {
		return s.toStatus(err)
	}
	return stream.SendAndClose(fromApplyResult(res))
}

// sameHeader checks that a later message leaves owner, selector and
// dry_run unset or repeats the first message's.
func sameHeader(set engine.ApplySet, req *probev1.ApplyTargetsRequest) *field.Error {
	switch {
	case req.GetOwner() != "" && req.GetOwner() != set.Owner:
		return field.Invalid(field.NewPath("owner"), req.GetOwner(), "differs from the first message's: set it only in the first")
	case len(req.GetSelector()) > 0 && !maps.Equal(req.GetSelector(), set.Selector):
		return field.Invalid(field.NewPath("selector"), len(req.GetSelector()), "differs from the first message's: set it only in the first")
	case req.GetDryRun() && !set.DryRun:
		return field.Invalid(field.NewPath("dryRun"), true, "differs from the first message's: set it only in the first")
	}
	return nil
}

// forwardAttempts bounds the tries of one forwarded update or prune of
// ApplyTargets while the target's shard changes hands (Unavailable).
const forwardAttempts = 3

// forwardsInFlight bounds the calls an apply forwards at once.
const forwardsInFlight = 16

// setForwarder forwards an apply's updates and prunes of targets other
// replicas probe to them (engine.ApplyForwarder), retrying while a shard
// changes hands, forwardsInFlight at a time; one that fails becomes a
// conflict of the result (the next apply retries it).
type setForwarder struct{ s *Server }

func (f setForwarder) Update(ctx context.Context, specs []*target.Spec) []engine.ApplyConflict {
	failed := make([]*engine.ApplyConflict, len(specs))
	forEach(len(specs), func(i int) {
		spec := specs[i]
		req := &probev1.UpdateTargetRequest{Target: fromSpec(spec)}
		err := forwardRetrying(ctx, f.s, spec.Name, func(ctx context.Context) (*engine.Target, error) {
			return f.s.engine.Update(ctx, spec)
		}, func(ctx context.Context, c probev1.ProbeServiceClient) (*engine.Target, error) {
			_, err := c.UpdateTarget(ctx, req)
			return nil, err
		})
		if err != nil {
			failed[i] = &engine.ApplyConflict{Name: spec.Name, Message: "not updated: " + status.Convert(err).Message()}
		}
	})
	var out []engine.ApplyConflict
	for _, c := range failed {
		if c != nil {
			out = append(out, *c)
		}
	}
	return out
}

func (f setForwarder) Delete(ctx context.Context, names []string) []string {
	deleted := make([]bool, len(names))
	forEach(len(names), func(i int) {
		req := &probev1.DeleteTargetRequest{Name: names[i]}
		err := forwardRetrying(ctx, f.s, names[i], func(ctx context.Context) (*engine.Target, error) {
			return f.s.engine.Delete(ctx, names[i])
		}, func(ctx context.Context, c probev1.ProbeServiceClient) (*engine.Target, error) {
			_, err := c.DeleteTarget(ctx, req)
			return nil, err
		})
		deleted[i] = err == nil || status.Code(err) == codes.NotFound
	})
	var out []string
	for i, ok := range deleted {
		if ok {
			out = append(out, names[i])
		}
	}
	return out
}

// forEach calls do(i) for i in [0, n), forwardsInFlight at a time, and
// returns once every call has.
func forEach(n int, do func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, forwardsInFlight)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			do(i)
		})
	}
	wg.Wait()
}

// forwardRetrying forwards remote to the owner of name (local runs when
// that is this replica, forward), again after the delay the owner-less
// answer asks for, up to forwardAttempts times.
func forwardRetrying[R any](ctx context.Context, s *Server, name string, local func(context.Context) (R, error), remote func(context.Context, probev1.ProbeServiceClient) (R, error)) error {
	var err error
	for range forwardAttempts {
		_, err = forward(ctx, s, name, &engine.NotOwnedError{Name: name}, local, remote)
		if status.Code(err) != codes.Unavailable {
			return err
		}
		select {
		case <-s.opts.Clock.After(retryOwnerless):
		case <-ctx.Done():
			return err
		}
	}
	return err
}

func fromApplyResult(res *engine.ApplyResult) *probev1.ApplyTargetsResponse {
	out := &probev1.ApplyTargetsResponse{
		Created:   res.Created,
		Updated:   res.Updated,
		Unchanged: res.Unchanged,
		Deleted:   res.Deleted,
		Revision:  res.Revision,
		DryRun:    res.DryRun,
	}
	for _, c := range res.Conflicts {
		out.Conflicts = append(out.Conflicts, &probev1.ApplyConflict{Name: c.Name, Message: c.Message})
	}
	return out
}

// fromSpec is a spec as the API writes it (no status).
func fromSpec(spec *target.Spec) *probev1.Target {
	return fromTarget(nil, &engine.Target{Spec: spec})
}
