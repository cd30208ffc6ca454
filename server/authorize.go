package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/engine"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Verbs of the authorization policy: what a call does to a target. A
// response carries a target's spec and status, or a probe's outcome,
// only to a caller who may also read the target (shown); ListReplicas
// needs one of the three on some name.
const (
	VerbRead    = "read"    // GetTarget, ListTargets, Watch
	VerbWrite   = "write"   // CreateTarget, UpdateTarget, DeleteTarget, ApplyTargets
	VerbOperate = "operate" // TriggerProbe, ResetTarget
)

// An Authorizer decides which targets a caller may read, write and
// operate (probed --authz-policy). Options.Authorizer nil allows
// everything.
type Authorizer interface {
	// Allowed reports whether identity may do verb to the target name.
	Allowed(identity, verb, name string) bool
	// AllowedAny reports whether identity may do verb to some name.
	AllowedAny(identity, verb string) bool
	// Grants describes what identity may do: equal descriptions, equal
	// access.
	Grants(identity string) string
	// Changed returns a channel closed the next time the policy changes.
	Changed() <-chan struct{}
}

// allowed reports whether the caller of ctx may do verb to name.
func (s *Server) allowed(ctx context.Context, verb, name string) bool {
	if s.opts.Authorizer == nil {
		return true
	}
	return s.opts.Authorizer.Allowed(engine.ClientFrom(ctx), verb, name)
}

// authorize is PermissionDenied, naming the identity, the verb and the
// name, unless the caller of ctx may do verb to name.
func (s *Server) authorize(ctx context.Context, verb, name string) error {
	if s.allowed(ctx, verb, name) {
		return nil
	}
	return status.Error(codes.PermissionDenied, fmt.Sprintf("%q may not %s target %q (--authz-policy)", engine.ClientFrom(ctx), verb, name))
}

// allowedAny reports whether the caller of ctx may do verb to some name.
func (s *Server) allowedAny(ctx context.Context, verb string) bool {
	if s.opts.Authorizer == nil {
		return true
	}
	return s.opts.Authorizer.AllowedAny(engine.ClientFrom(ctx), verb)
}

// shown is t as the response to the caller of ctx carries it: whole when
// the caller may read it; else its name and the revision of its last
// event, so that a caller allowed to write or operate but not to read
// learns that its call took effect, and when, but nothing of the spec
// (whose HTTP headers may hold credentials) or of the probes' results.
func (s *Server) shown(ctx context.Context, t *engine.Target) *probev1.Target {
	if s.allowed(ctx, VerbRead, t.Spec.Name) {
		return s.target(nil, t)
	}
	return &probev1.Target{Name: t.Spec.Name, Status: &probev1.TargetStatus{Revision: t.Status.Revision}}
}

// visible is the engine's read filter of the caller of ctx (nil: all).
func (s *Server) visible(ctx context.Context) func(name string) bool {
	if s.opts.Authorizer == nil {
		return nil
	}
	id, a := engine.ClientFrom(ctx), s.opts.Authorizer
	return func(name string) bool { return a.Allowed(id, VerbRead, name) }
}

// limitPruning limits the pruning of set to the targets the caller of
// ctx may write (its desired targets were authorized as they arrived).
func (s *Server) limitPruning(ctx context.Context, set *engine.ApplySet) {
	if s.opts.Authorizer == nil {
		return
	}
	id, a := engine.ClientFrom(ctx), s.opts.Authorizer
	set.Writable = func(name string) bool { return a.Allowed(id, VerbWrite, name) }
}

// errAccessChanged ends a Watch stream whose caller's access changed.
var errAccessChanged = errors.New("the authorization policy changed what this caller may read")

// watchPolicy cancels ctx with errAccessChanged when the policy changes
// what the caller of ctx may do from grants, what it was granted when its
// stream was authorized (etcd checks a watch only when it is created; a
// stream here follows the policy). grants is taken by the caller, before
// the stream sends anything: taken here, a reload between the stream's
// start and this goroutine's first step would go unseen, and the stream
// would go on under access it no longer has. It returns when ctx is done.
func (s *Server) watchPolicy(ctx context.Context, cancel context.CancelCauseFunc, grants string) {
	a, id := s.opts.Authorizer, engine.ClientFrom(ctx)
	for {
		changed := a.Changed()
		if a.Grants(id) != grants {
			cancel(errAccessChanged)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
