package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/probed/probed/engine"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Cluster mode: a replica serves the whole API, but only the owner of a
// target (the replica that probes it) changes its state. UpdateTarget,
// DeleteTarget, ResetTarget and TriggerProbe of a target another replica
// owns are forwarded to that replica's advertised address, with the
// caller's credentials (its authorization header), once: a forwarded call
// that finds the target owned elsewhere again (ownership moved meanwhile)
// is Unavailable, and the client retries. When the owner is this replica
// itself (its view of the cluster has the claim of the shard, and its
// engine had not applied it yet when the call ran), the call runs here
// again, once, after the engine has reached the claim (OwnedHereError).

// A Forwarder reaches the replica that owns a target.
type Forwarder interface {
	// Owner returns a connection to the replica that owns the named
	// target and that replica's id, or an error when no replica owns it
	// now (its shard is changing hands). When the owner is this
	// replica, err is an *OwnedHereError.
	Owner(ctx context.Context, name string) (conn grpc.ClientConnInterface, replica string, err error)
}

// OwnedHereError is what a Forwarder's Owner returns when the target's
// owner is this replica: its claim of the shard is in the engine's log at
// Position, which the engine may not have applied yet.
type OwnedHereError struct{ Position uint64 }

func (e *OwnedHereError) Error() string {
	return fmt.Sprintf("its shard is owned by this replica from position %d of the log", e.Position)
}

// ownedHereWait bounds how long a call waits for the engine to apply this
// replica's claim of a target's shard before it runs here again.
const ownedHereWait = 2 * time.Second

// Metadata of forwarded calls.
const (
	// MetadataForwardedBy names the replica that forwarded a call.
	MetadataForwardedBy = "probed-forwarded-by"
	// MetadataForwardedFor is the identity of the caller a replica
	// forwards a call for; the owner honours it only from a replica's
	// own credential (auth.Options.Replicas).
	MetadataForwardedFor  = "probed-forwarded-for"
	metadataAuthorization = "authorization"
)

// retryOwnerless is how long a client is told to wait when a target's
// owner is changing.
const retryOwnerless = time.Second

// owned runs local, the call on this replica's engine, and, when the
// engine says this replica does not own name, remote against the owner
// (forward).
func owned[R any](ctx context.Context, s *Server, name string, local func(context.Context) (R, error), remote func(context.Context, probev1.ProbeServiceClient) (R, error)) (R, error) {
	r, err := local(ctx)
	if err == nil {
		return r, nil
	}
	return forward(ctx, s, name, err, local, remote)
}

// forward runs remote against the owner of name when err says this
// replica does not own it (or local again, once, when the owner is this
// replica: OwnedHereError); otherwise it returns err as a status.
func forward[R any](ctx context.Context, s *Server, name string, err error, local func(context.Context) (R, error), remote func(context.Context, probev1.ProbeServiceClient) (R, error)) (R, error) {
	var zero R
	if !errors.Is(err, engine.ErrNotOwned) || s.opts.Forwarder == nil {
		return zero, s.toStatus(err)
	}
	in, _ := metadata.FromIncomingContext(ctx)
	if by := in.Get(MetadataForwardedBy); len(by) > 0 {
		// Forwarded to us, but we do not own it (any more): no second hop.
		return zero, unavailable(fmt.Sprintf("target %q changed owner while the call was forwarded by %s; retry", name, by[0]))
	}
	conn, replica, ferr := s.opts.Forwarder.Owner(ctx, name)
	if here, ok := errors.AsType[*OwnedHereError](ferr); ok {
		return again(ctx, s, name, here.Position, local)
	}
	if ferr != nil {
		return zero, unavailable(fmt.Sprintf("target %q has no owner right now (its shard is changing hands): %v; retry", name, ferr))
	}
	out := metadata.Pairs(MetadataForwardedBy, s.opts.ReplicaID)
	if id := engine.ClientFrom(ctx); id != "" {
		out.Set(MetadataForwardedFor, id)
	}
	if auth := in.Get(metadataAuthorization); len(auth) > 0 {
		out.Set(metadataAuthorization, auth...)
	}
	resp, err := remote(metadata.NewOutgoingContext(ctx, out), probev1.NewProbeServiceClient(conn))
	if err != nil {
		s.opts.Logger.Debug("forwarded call failed", "target", name, "owner", replica, "err", err)
		return zero, err // the owner's status, as it sent it
	}
	return resp, nil
}

// unavailable is an Unavailable status telling the client when to retry.
func unavailable(msg string) error {
	return withDetails(codes.Unavailable, msg, &errdetails.RetryInfo{RetryDelay: durationpb.New(retryOwnerless)})
}

// again runs local once more after the engine has reached position pos
// of its log (waiting ownedHereWait at most): this replica's claim of
// name's shard, which its engine had not applied when local first ran.
func again[R any](ctx context.Context, s *Server, name string, pos uint64, local func(context.Context) (R, error)) (R, error) {
	var zero R
	wctx, cancel := context.WithTimeout(ctx, ownedHereWait)
	err := s.engine.SyncOwned(wctx, pos)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return zero, s.toStatus(ctx.Err())
		}
		return zero, unavailable(fmt.Sprintf("target %q: this replica owns its shard and has not taken it over yet (%v); retry", name, err))
	}
	r, err := local(ctx)
	switch {
	case err == nil:
		return r, nil
	case errors.Is(err, engine.ErrNotOwned):
		return zero, unavailable(fmt.Sprintf("target %q has no owner right now (its shard is changing hands); retry", name))
	}
	return zero, s.toStatus(err)
}
