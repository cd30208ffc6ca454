package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"

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
// closes its side: a stream that breaks first changes nothing. In
// cluster mode the updates and prunes of targets another replica probes
// are forwarded to it (UpdateTarget, DeleteTarget, as the caller), after
// this replica's own writes.
func (s *Server) ApplyTargets(stream grpc.ClientStreamingServer[probev1.ApplyTargetsRequest, probev1.ApplyTargetsResponse]) error {
	ctx := stream.Context()
	set, err := s.receiveSet(stream)
	if err != nil {
		return err
	}
	if err := s.authorizeSet(ctx, &set); err != nil {
		return err
	}
	res, err := s.engine.Apply(ctx, set)
	if err != nil {
		return s.toStatus(err)
	}
	s.forwardSet(ctx, res)
	return stream.SendAndClose(fromApplyResult(res))
}

// receiveSet reads the whole stream: the set of its first message, and
// the targets of every message.
func (s *Server) receiveSet(stream grpc.ClientStreamingServer[probev1.ApplyTargetsRequest, probev1.ApplyTargetsResponse]) (engine.ApplySet, error) {
	var set engine.ApplySet
	for n := 0; ; n++ {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return set, status.Error(codes.InvalidArgument, "ApplyTargets: the stream ended before its first message (owner is required)")
			}
			return set, nil
		}
		if err != nil {
			return set, err // cancelled or broken: nothing is applied
		}
		if n == 0 {
			set.Owner, set.Selector, set.DryRun = req.GetOwner(), maps.Clone(req.GetSelector()), req.GetDryRun()
		} else if fe := sameHeader(set, req); fe != nil {
			return set, s.toStatus(field.List{fe}.Err())
		}
		if len(set.Targets)+len(req.GetTargets()) > engine.MaxApplyTargets {
			return set, s.toStatus(field.List{field.Invalid(field.NewPath("targets"), len(set.Targets)+len(req.GetTargets()), fmt.Sprintf("at most %d targets in one set", engine.MaxApplyTargets))}.Err())
		}
		for _, t := range req.GetTargets() {
			set.Targets = append(set.Targets, toSpec(t))
		}
	}
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

// forwardSet sends the updates and prunes of targets other replicas
// probe to them, retrying while a shard changes hands; one that fails
// becomes a conflict of the result (the next apply retries it).
func (s *Server) forwardSet(ctx context.Context, res *engine.ApplyResult) {
	for _, spec := range res.ForwardUpdates {
		req := &probev1.UpdateTargetRequest{Target: fromSpec(spec)}
		err := forwardRetrying(ctx, s, spec.Name, func(ctx context.Context, c probev1.ProbeServiceClient) (*probev1.UpdateTargetResponse, error) {
			return c.UpdateTarget(ctx, req)
		})
		if err != nil {
			res.Updated = remove(res.Updated, spec.Name)
			res.Conflicts = append(res.Conflicts, engine.ApplyConflict{Name: spec.Name, Message: "not updated: " + status.Convert(err).Message()})
		}
	}
	for _, name := range res.ForwardDeletes {
		req := &probev1.DeleteTargetRequest{Name: name}
		err := forwardRetrying(ctx, s, name, func(ctx context.Context, c probev1.ProbeServiceClient) (*probev1.DeleteTargetResponse, error) {
			return c.DeleteTarget(ctx, req)
		})
		if err != nil && status.Code(err) != codes.NotFound {
			res.Deleted = remove(res.Deleted, name)
		}
	}
	if len(res.ForwardUpdates)+len(res.ForwardDeletes) > 0 {
		res.Revision = max(res.Revision, s.engine.Revision())
	}
}

// forwardRetrying forwards call to the owner of name, again after the
// delay the owner-less answer asks for, up to forwardAttempts times.
func forwardRetrying[R any](ctx context.Context, s *Server, name string, call func(context.Context, probev1.ProbeServiceClient) (R, error)) error {
	var err error
	for range forwardAttempts {
		_, err = forward(ctx, s, name, &engine.NotOwnedError{Name: name}, call)
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

func remove(names []string, name string) []string {
	out := names[:0]
	for _, n := range names {
		if n != name {
			out = append(out, n)
		}
	}
	return out
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
	return fromTarget(&engine.Target{Spec: spec})
}
