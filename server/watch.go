package server

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/engine/timeout"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Watch streams events: a snapshot or a replay, then live events, batched
// per message (of at most MaxResponseBytes), with a progress notification on an idle stream at least
// every ProgressInterval. It ends with OutOfRange for a compacted revision,
// ResourceExhausted (with the revision to resume from) for a client too
// slow to keep up, and Unavailable when the server shuts down.
func (s *Server) Watch(req *probev1.WatchRequest, stream probev1.ProbeService_WatchServer) error {
	ctx := stream.Context()
	opts, err := watchOptions(req)
	if err != nil {
		return s.toStatus(err)
	}
	opts.Visible = s.visible(ctx)
	if s.opts.Authorizer != nil {
		// A change of what the caller may read ends the stream with
		// PermissionDenied; the client watches again, from the revision
		// it reached, under the new policy.
		grants := s.opts.Authorizer.Grants(engine.ClientFrom(ctx))
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel(nil) // before the wait: it ends the goroutine
		wg.Go(func() { s.watchPolicy(ctx, cancel, grants) })
	}
	w, err := s.engine.Watch(ctx, opts)
	if err != nil {
		return s.toStatus(err)
	}
	defer w.Close()
	// Tell the client at once that its watch is accepted (it may have
	// nothing to receive for a while); a failed send shows up below.
	_ = stream.SendHeader(metadata.MD{})
	s.opts.Observer.WatchStarted()
	defer s.opts.Observer.WatchEnded()
	for {
		b, err := timeout.Call(ctx, s.opts.Clock, s.opts.ProgressInterval, w.Next)
		switch {
		case errors.Is(err, timeout.ErrExpired): // idle
			if err := stream.Send(&probev1.WatchResponse{ProgressNotify: true, Revision: w.Progress()}); err != nil {
				return err
			}
			continue
		case err != nil:
			if errors.Is(context.Cause(ctx), errAccessChanged) {
				return status.Error(codes.PermissionDenied, fmt.Sprintf("%s: %q may watch again from revision %d", errAccessChanged, engine.ClientFrom(ctx), w.Progress()+1))
			}
			if ctx.Err() != nil {
				return s.toStatus(ctx.Err())
			}
			if errors.Is(err, engine.ErrResourceExhausted) {
				s.opts.Logger.Info("watcher ended as too slow", "err", err)
			}
			return s.toStatus(err)
		}
		events := make([]*probev1.Event, len(b.Events))
		for i := range b.Events {
			events[i] = fromEvent(&b.Events[i])
		}
		if err := sendEvents(stream.Send, events, b.Snapshot, b.SnapshotComplete, b.Revision); err != nil {
			return err
		}
		s.opts.Observer.EventsSent(len(b.Events))
	}
}

// maxWatchKinds is how many kinds a Watch may list: each at most once.
var maxWatchKinds = len(eventKinds)

func watchOptions(req *probev1.WatchRequest) (engine.WatchOptions, error) {
	opts := engine.WatchOptions{Since: req.GetSinceRevision(), Names: req.GetNames(), Selector: req.GetLabelSelector(), Namespace: req.GetNamespace()}
	errs := target.ValidateSelection(req.GetNames(), req.GetLabelSelector())
	errs = append(errs, validateNamespace(field.NewPath("namespace"), req.GetNamespace())...)
	if n := len(req.GetKinds()); n > maxWatchKinds {
		// As many as there are kinds: more repeats one.
		return opts, append(errs, field.Invalid(field.NewPath("kinds"), n, fmt.Sprintf("must list at most %d kinds", maxWatchKinds))).Err()
	}
	for i, k := range req.GetKinds() {
		kind, ok := toDomain(eventKinds, k)
		if !ok {
			errs = append(errs, field.Invalid(field.NewPath("kinds").Index(i), k.String(), "must be an EVENT_KIND_* other than EVENT_KIND_UNSPECIFIED"))
			continue
		}
		opts.Kinds = append(opts.Kinds, kind)
	}
	return opts, errs.Err()
}
