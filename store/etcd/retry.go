package etcd

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Backoff between retries of a request that failed transiently: doubling
// from minBackoff up to maxBackoff.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// code is the gRPC code of an error from the etcd client: etcd's own
// errors (rpctypes.EtcdError) and gRPC statuses.
func code(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	return status.Code(err)
}

// transient reports whether a request that failed with err (the caller's
// context ctx) is worth retrying: the request timed out, or etcd had no
// leader, changed it, was unreachable, stopping, overloaded or out of
// space (an operator can compact, defragment and disarm it). Its outcome
// is then unknown: it may have been applied.
func transient(ctx context.Context, err error) bool {
	switch {
	case ctx.Err() != nil, errors.Is(err, ErrClosed):
		return false // the caller gave up, or the store closed
	case errors.Is(err, errRequestTimeout), errors.Is(err, errWatchEnded):
		return true
	case errors.Is(err, rpctypes.ErrNotLeader):
		return true // a lease operation reached a follower
	case tooLarge(err):
		return false
	case code(err) == codes.Unknown && strings.HasSuffix(rpctypes.ErrorDesc(err), "raft: stopped"):
		return true // a member stopping (raft.ErrStopped, which etcd passes on unmapped)
	}
	switch code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted:
		return true
	case codes.Canceled:
		return true // cancelled by the server (ours were checked above)
	}
	return false
}

// errWatchEnded: a watch ended without an error of etcd's (the client's
// stream broke off).
var errWatchEnded = errors.New("etcd watch ended")

// tooLarge reports whether err says a request was larger than etcd
// (--max-request-bytes) or the client (MaxCallSendMsgSize) accepts.
func tooLarge(err error) bool {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return true
	}
	return code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "larger than max")
}

// backoff is the delay before the next retry: it doubles from minBackoff
// up to maxBackoff.
type backoff struct {
	next time.Duration
}

// wait waits for the next delay on the store's clock; false if ctx ended
// first.
func (s *Store) wait(ctx context.Context, b *backoff) bool {
	b.next = min(max(2*b.next, minBackoff), maxBackoff)
	t := s.clock.NewTimer(b.next)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true
	case <-ctx.Done():
		return false
	}
}

// retry calls do until it succeeds, fails with an error that is not
// transient, or ctx ends (the store's ErrClosed or ctx's error). Each call
// gets the context of one request. what names the operation in logs.
//
// The first attempt times out after Options.AttemptTimeout, and each
// timeout doubles the next attempt's up to Options.RequestTimeout: a
// request in flight when etcd's leader fails (which no answer will end)
// is sent again about when a new leader exists, instead of waiting out
// RequestTimeout, while a slow etcd still gets the whole RequestTimeout.
func (s *Store) retry(ctx context.Context, what string, do func(rctx context.Context) error) error {
	limit := s.timeout
	if limit > 0 && s.firstAttempt > 0 {
		limit = min(limit, s.firstAttempt)
	}
	return s.retrying(ctx, what, func() (bool, error) {
		err := s.attempt(ctx, limit, do)
		if errors.Is(err, errRequestTimeout) {
			limit = min(2*limit, s.timeout)
		}
		return err != nil && transient(ctx, err), err
	})
}

// retrying calls do until it succeeds, fails with again false, or ctx
// ends (the store's ErrClosed or ctx's error).
func (s *Store) retrying(ctx context.Context, what string, do func() (again bool, err error)) error {
	var b backoff
	for attempt := 1; ; attempt++ {
		retry, err := do()
		switch {
		case err == nil:
			return nil
		case s.ctx.Err() != nil || ctx.Err() != nil:
			return s.done(ctx)
		case !retry:
			return err
		}
		s.logRetry(what, attempt, err)
		if !s.wait(ctx, &b) {
			return s.done(ctx)
		}
	}
}

// logRetry logs a transient failure: the first few and then every tenth.
func (s *Store) logRetry(what string, attempt int, err error) {
	if attempt <= 3 || attempt%10 == 0 {
		s.log.Warn("etcd: retrying", "op", what, "attempt", attempt, "err", err)
	}
}
