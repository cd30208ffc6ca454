package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/field"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Bounds of ApplyTargets: what one identity can make probed hold, and
// for how long, before anything is applied (SECURITY.md, "ApplyTargets
// bounds").
const (
	// DefaultMaxApplyBytes bounds the messages of one set, in bytes on
	// the wire (each message is also bounded by the server's receive
	// limit, --max-request-bytes).
	DefaultMaxApplyBytes = 64 << 20
	// DefaultMaxAppliesPerClient bounds the ApplyTargets calls one
	// identity has open at once.
	DefaultMaxAppliesPerClient = 2
	// DefaultApplyIdleTimeout bounds the wait for the next message of a
	// set (or its end).
	DefaultApplyIdleTimeout = 30 * time.Second
	// DefaultApplyTimeout bounds the whole upload of a set, from the call's
	// start to the client's end of the stream.
	DefaultApplyTimeout = 5 * time.Minute
	// ApplyTargetsPerToken is how many targets of a set one token of the
	// caller's rate limit pays for: the call's own token pays for the
	// first ones, each further ApplyTargetsPerToken (or part) takes one
	// more, as they arrive.
	ApplyTargetsPerToken = 100
)

type applyStream = grpc.ClientStreamingServer[probev1.ApplyTargetsRequest, probev1.ApplyTargetsResponse]

// setReader reads the set of one ApplyTargets stream, checking each
// message as it arrives: the header of the first, the bytes so far, the
// caller's write permission on each target's name and each target's
// validation (engine.SetCheck), and charging the caller's rate limit
// by size. It stops at the first message with a problem, without reading
// the rest.
type setReader struct {
	s     *Server
	ctx   context.Context
	id    string // the caller's identity
	start time.Time
	set   engine.ApplySet
	check *engine.SetCheck
	bytes int
}

// receiveSet reads the whole set of stream (see setReader), within the
// idle and overall bounds.
func (s *Server) receiveSet(ctx context.Context, stream applyStream) (engine.ApplySet, error) {
	r := &setReader{s: s, ctx: ctx, id: engine.ClientFrom(ctx), start: s.opts.Clock.Now()}
	overall := s.opts.Clock.NewTimer(s.opts.ApplyTimeout)
	defer overall.Stop()
	done := make(chan struct{})
	defer close(done)
	msgs := receive(stream, done)
	for n := 0; ; n++ {
		req, err := r.next(msgs, overall)
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return r.set, status.Error(codes.InvalidArgument, "ApplyTargets: the stream ended before its first message (owner is required)")
			}
			return r.set, nil
		}
		if err != nil {
			return r.set, err // cancelled, broken or too slow: nothing is applied
		}
		if err := r.add(n, req, overall); err != nil {
			return r.set, err
		}
	}
}

// received is one message of a stream, or the error that ended it.
type received struct {
	req *probev1.ApplyTargetsRequest
	err error
}

// receive reads the messages of stream in a goroutine of its own, one
// ahead of what was taken from the channel it returns, until the stream
// ends or done is closed. A read in progress when done is closed ends
// with the call: grpc cancels the stream's context when the handler
// returns.
func receive(stream applyStream, done <-chan struct{}) <-chan received {
	out := make(chan received)
	go func() {
		for {
			req, err := stream.Recv()
			select {
			case out <- received{req, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// next waits for the next message, at most ApplyIdleTimeout and until
// the overall bound.
func (r *setReader) next(msgs <-chan received, overall clockwork.Timer) (*probev1.ApplyTargetsRequest, error) {
	idle := r.s.opts.Clock.NewTimer(r.s.opts.ApplyIdleTimeout)
	defer idle.Stop()
	select {
	case m := <-msgs:
		return m.req, m.err
	case <-idle.Chan():
		return nil, status.Error(codes.DeadlineExceeded, fmt.Sprintf(
			"ApplyTargets: no message for %v: a set is sent without pauses (nothing was applied)", r.s.opts.ApplyIdleTimeout))
	case <-overall.Chan():
		return nil, r.tooLong()
	case <-r.ctx.Done():
		return nil, r.s.toStatus(r.ctx.Err())
	}
}

func (r *setReader) tooLong() error {
	return status.Error(codes.DeadlineExceeded, fmt.Sprintf(
		"ApplyTargets: the set was not complete within %v of the call's start (nothing was applied)", r.s.opts.ApplyTimeout))
}

// add checks message n of the set and adds its targets: a problem ends
// the call at once, naming it; the violations of one message are
// reported together.
func (r *setReader) add(n int, req *probev1.ApplyTargetsRequest, overall clockwork.Timer) error {
	r.bytes += proto.Size(req)
	if r.bytes > r.s.opts.MaxApplyBytes {
		return r.s.toStatus(field.List{field.Invalid(field.NewPath("targets"), r.bytes,
			fmt.Sprintf("the set's messages exceed %d bytes, the most one set may hold (--max-apply-bytes)", r.s.opts.MaxApplyBytes))}.Err())
	}
	if n == 0 {
		r.set.Owner, r.set.Selector, r.set.DryRun = req.GetOwner(), maps.Clone(req.GetSelector()), req.GetDryRun()
		var errs field.List
		r.check, errs = r.s.engine.CheckSet(r.set.Owner, r.set.Selector)
		if err := errs.Err(); err != nil {
			return r.s.toStatus(err)
		}
	} else if fe := sameHeader(r.set, req); fe != nil {
		return r.s.toStatus(field.List{fe}.Err())
	}
	var errs field.List
	for _, t := range req.GetTargets() {
		if err := r.s.authorize(r.ctx, VerbWrite, t.GetName()); err != nil {
			return err
		}
		spec := toSpec(t)
		if fe := r.check.Add(spec); len(fe) > 0 {
			errs = append(errs, fe...)
			continue
		}
		r.set.Targets = append(r.set.Targets, spec)
		if i := r.check.Len(); i > ApplyTargetsPerToken && (i-1)%ApplyTargetsPerToken == 0 {
			if err := r.charge(overall); err != nil {
				return err
			}
		}
	}
	return r.s.toStatus(errs.Err())
}

// charge takes one more token of the caller's rate limit, waiting for it
// when it comes before the overall bound passes; when it would not, the
// call is ResourceExhausted with the wait in a google.rpc.RetryInfo.
func (r *setReader) charge(overall clockwork.Timer) error {
	if r.s.opts.Limiter == nil {
		return nil
	}
	wait, cancel := r.s.opts.Limiter.Reserve(r.id)
	if wait <= 0 {
		return nil
	}
	if left := r.s.opts.ApplyTimeout - r.s.opts.Clock.Since(r.start); wait > left {
		cancel()
		msg := fmt.Sprintf("client %q is over its rate of calls that start probes: a set of more than %d targets takes one more token per %d (--registrations-per-second, --registrations-burst); retry in %v",
			r.id, ApplyTargetsPerToken, ApplyTargetsPerToken, wait.Round(time.Millisecond))
		return withDetails(codes.ResourceExhausted, msg, &errdetails.RetryInfo{RetryDelay: durationpb.New(wait)})
	}
	t := r.s.opts.Clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.Chan():
		return nil
	case <-overall.Chan():
		cancel()
		return r.tooLong()
	case <-r.ctx.Done():
		cancel()
		return r.s.toStatus(r.ctx.Err())
	}
}
