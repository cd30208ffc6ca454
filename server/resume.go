package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/probed/probed/engine"
)

// ResumeApplies finishes, every period until ctx ends, the applies that
// no replica is running any more (cluster mode: the replica that began
// one died or lost its lease in the middle; docs/cluster.md,
// "ApplyTargets"): each is applied again from its recorded desired list,
// as the caller that began it — its identity for the limits, its write
// permission (today's policy) for the prunes, its updates and prunes of
// other replicas' targets forwarded for it — by the replica that takes
// its lock first. It returns when ctx ends; an apply it runs then goes on
// until the engine stops.
func (s *Server) ResumeApplies(ctx context.Context, period time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.opts.Clock.After(period):
		}
		owners, err := s.engine.InterruptedApplies(ctx)
		if err != nil {
			s.opts.Logger.Warn("listing the interrupted applies", "err", err)
			continue
		}
		for _, owner := range owners {
			if ctx.Err() != nil {
				return
			}
			began := s.opts.Clock.Now()
			res, err := s.engine.ResumeApply(ctx, owner, s.resumed)
			switch {
			case err != nil:
				s.opts.Logger.Warn("resuming an interrupted apply", "owner", owner, "err", err)
			case res != nil:
				s.opts.Logger.Info("resumed an interrupted apply", "owner", owner, "created", len(res.Created),
					"updated", len(res.Updated), "deleted", len(res.Deleted), "conflicts", len(res.Conflicts),
					"took", s.opts.Clock.Since(began))
			}
		}
	}
}

// resumed gives a resumed apply of client's what its call had: the write
// permission of client for its prunes, and forwarding. Its desired
// targets were authorized when the call came; the policy may have changed
// since (a reload), so they are authorized again, as a new call of the
// same list would be: one that client may no longer write refuses the
// resume (the apply ends as it stands; client's next ApplyTargets is
// PermissionDenied the same way).
func (s *Server) resumed(set *engine.ApplySet, client string) error {
	set.Forward = setForwarder{s}
	a := s.opts.Authorizer
	if a == nil {
		return nil
	}
	for _, t := range set.Targets {
		if !a.Allowed(client, VerbWrite, t.Name) {
			return fmt.Errorf("%w: %q may no longer write %q (--authz-policy changed since the call)", ErrResumeRefused, client, t.Name)
		}
	}
	set.Writable = func(name string) bool { return a.Allowed(client, VerbWrite, name) }
	return nil
}

// ErrResumeRefused: an interrupted apply was not resumed because its
// caller may no longer write one of its targets.
var ErrResumeRefused = errors.New("interrupted apply not resumed")
