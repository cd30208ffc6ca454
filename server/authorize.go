package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/engine"
)

// Verbs of the authorization policy: what a call does to a target.
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

// visible is the engine's read filter of the caller of ctx (nil: all).
func (s *Server) visible(ctx context.Context) func(name string) bool {
	if s.opts.Authorizer == nil {
		return nil
	}
	id, a := engine.ClientFrom(ctx), s.opts.Authorizer
	return func(name string) bool { return a.Allowed(id, VerbRead, name) }
}

// authorizeSet checks that the caller may write every desired target of
// set, and limits its pruning to the targets the caller may write.
func (s *Server) authorizeSet(ctx context.Context, set *engine.ApplySet) error {
	if s.opts.Authorizer == nil {
		return nil
	}
	for _, t := range set.Targets {
		if err := s.authorize(ctx, VerbWrite, t.Name); err != nil {
			return err
		}
	}
	id, a := engine.ClientFrom(ctx), s.opts.Authorizer
	set.Writable = func(name string) bool { return a.Allowed(id, VerbWrite, name) }
	return nil
}

// errAccessChanged ends a Watch stream whose caller's access changed.
var errAccessChanged = errors.New("the authorization policy changed what this caller may read")

// watchPolicy cancels ctx with errAccessChanged when the policy changes
// what the caller of ctx may do (etcd checks a watch only when it is
// created; a stream here follows the policy). It returns when ctx is
// done.
func (s *Server) watchPolicy(ctx context.Context, cancel context.CancelCauseFunc) {
	a, id := s.opts.Authorizer, engine.ClientFrom(ctx)
	grants := a.Grants(id)
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
