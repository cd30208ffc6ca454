package client

import (
	"context"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Defaults of WithBackoff.
const (
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// WatchOption configures Watch.
type WatchOption func(*watchOptions)

type watchOptions struct {
	since      uint64
	names      []string
	labels     map[string]string
	kinds      []probev1.EventKind
	namespace  string
	minBackoff time.Duration
	maxBackoff time.Duration
	onState    func(WatchState)
}

// WithSince starts the watch with a replay of every retained event with
// revision >= rev instead of a snapshot (rev 0, the default). When rev is
// older than the retained history, the watch starts with a snapshot whose
// first response is Resynced.
func WithSince(rev uint64) WatchOption {
	return func(o *watchOptions) { o.since = rev }
}

// WithNames limits the watch to these targets.
func WithNames(names ...string) WatchOption {
	return func(o *watchOptions) { o.names = append(o.names, names...) }
}

// WithLabels limits the watch to the targets whose labels include all of
// labels.
func WithLabels(labels map[string]string) WatchOption {
	return func(o *watchOptions) { o.labels = maps.Clone(labels) }
}

// WithKinds limits the watch to these kinds of events; snapshot events are
// always sent.
func WithKinds(kinds ...probev1.EventKind) WatchOption {
	return func(o *watchOptions) { o.kinds = append(o.kinds, kinds...) }
}

// WithNamespace limits the watch to the targets of one namespace (names
// "NAMESPACE/...").
func WithNamespace(namespace string) WatchOption {
	return func(o *watchOptions) { o.namespace = namespace }
}

// WithBackoff sets the bounds of the jittered exponential delay between
// reconnections (default DefaultMinBackoff to DefaultMaxBackoff). The
// delay starts again from min once a message arrives.
func WithBackoff(minDelay, maxDelay time.Duration) WatchOption {
	return func(o *watchOptions) {
		o.minBackoff = max(minDelay, time.Millisecond)
		o.maxBackoff = max(maxDelay, o.minBackoff)
	}
}

// WithStateFunc calls fn with the watch's connection state each time it
// changes: when a stream is open (the server accepted the watch), and
// when the stream failed or could not be opened and the watch will retry
// (Err and Retry say why and when). The terminal error is not reported
// here: the channel delivers it. fn runs on the watch's goroutine, so it
// must return quickly and must not wait for the watch.
func WithStateFunc(fn func(WatchState)) WatchOption {
	return func(o *watchOptions) { o.onState = fn }
}

// WatchState is the connection state of a watch, given to the function of
// WithStateFunc.
type WatchState struct {
	// Connected: a stream is open. Otherwise the watch is reconnecting.
	Connected bool
	// Err is why the last stream ended or could not be opened, e.g. an
	// ErrUnavailable error when the server cannot be reached; nil when
	// Connected.
	Err error
	// Retry is how long the watch waits before its next attempt; 0 when
	// Connected.
	Retry time.Duration
}

// WatchResponse is one message of a watch, or its terminal error.
type WatchResponse struct {
	// Events in revision order.
	Events []*probev1.Event
	// Snapshot: the events are part of a snapshot of the current state;
	// SnapshotComplete marks its last response, after which live events
	// follow.
	Snapshot         bool
	SnapshotComplete bool
	// ProgressNotify: a heartbeat on an idle stream, with no events.
	ProgressNotify bool
	// Revision: every event up to it has been delivered (or filtered out);
	// a snapshot is consistent at it.
	Revision uint64
	// Resynced: the watch could not resume where it stopped (the history
	// it needed was compacted, or the connection dropped in the middle of
	// a snapshot), so this response starts a new snapshot: discard the
	// state built from earlier responses.
	Resynced bool
	// Err is set on the last response only: the watch ended with this
	// error (an *InvalidError, ErrUnauthenticated, ...).
	Err error
}

// Watch streams events: a snapshot of the current state (or, WithSince, a
// replay of the retained history), then live events, in revision order.
//
// It survives server restarts and dropped connections: on Unavailable, on
// a transport error and when the server ends it as too slow
// (ResourceExhausted), it reconnects with a jittered exponential backoff
// and resumes after the last revision delivered, so every event is
// delivered exactly once with no gap. A connection dropped in the middle
// of a snapshot, or a resume revision the server no longer retains
// (OutOfRange), starts a new snapshot whose first response is Resynced.
// Any other error is terminal (InvalidArgument, Unauthenticated, the
// client being closed, ...): it is delivered as one response with Err,
// then the channel is closed.
//
// The channel is closed when ctx is done or after a terminal error. The
// caller must cancel ctx when it stops reading, or the watch's goroutine
// and stream leak. Events are not dropped: the watch waits for the caller
// (and the server ends it as too slow if the caller falls far behind,
// which the watch then resumes transparently).
func (c *Client) Watch(ctx context.Context, opts ...WatchOption) <-chan WatchResponse {
	o := watchOptions{minBackoff: DefaultMinBackoff, maxBackoff: DefaultMaxBackoff}
	for _, opt := range opts {
		opt(&o)
	}
	w := &watchStream{svc: c.svc, opts: o, next: o.since, out: make(chan WatchResponse)}
	go w.run(ctx)
	return w.out
}

// watchStream is one Watch: its state is used by its goroutine only.
type watchStream struct {
	svc  probev1.ProbeServiceClient
	opts watchOptions
	out  chan WatchResponse

	// next is the revision to resume from: 0 for a snapshot, otherwise one
	// past the highest revision delivered or reported complete.
	next uint64
	// inSnapshot: part of a snapshot was delivered, not its last response.
	inSnapshot bool
	// resync: the next snapshot replaces what was delivered; mark it.
	resync bool
}

func (w *watchStream) run(ctx context.Context) {
	defer close(w.out)
	attempt := 0
	for {
		received, err := w.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		if received {
			attempt = 0
		}
		switch {
		case status.Code(err) == codes.OutOfRange && w.next > 0:
			// Compacted: start over with a snapshot, at once.
			w.restartSnapshot()
			continue
		case retryable(err):
			if w.inSnapshot {
				w.restartSnapshot()
			}
		default:
			w.send(ctx, WatchResponse{Err: fromStatus(err)})
			return
		}
		delay := w.opts.backoff(attempt)
		w.state(WatchState{Err: fromStatus(err), Retry: delay})
		if !sleep(ctx, delay) {
			return
		}
		attempt++
	}
}

// retryable reports whether a watch that ended with err resumes.
func retryable(err error) bool {
	if errors.Is(err, io.EOF) {
		return true // ended without a status: the stream was cut
	}
	switch status.Code(err) {
	case codes.Unavailable:
		return true
	case codes.ResourceExhausted:
		// Only the server's "too slow": a message too large would fail
		// again.
		return errorReason(err) == probev1.ErrorReason_WATCHER_TOO_SLOW.String()
	default:
		return false
	}
}

// restartSnapshot makes the next stream start with a snapshot that
// replaces everything delivered so far.
func (w *watchStream) restartSnapshot() {
	w.next = 0
	w.inSnapshot = false
	w.resync = true
}

// stream runs one Watch call until it fails; received reports whether any
// message arrived.
func (w *watchStream) stream(ctx context.Context) (received bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := w.svc.Watch(sctx, &probev1.WatchRequest{
		SinceRevision: w.next,
		Names:         w.opts.names,
		Namespace:     w.opts.namespace,
		LabelSelector: w.opts.labels,
		Kinds:         w.opts.kinds,
	})
	if err != nil {
		return false, err
	}
	// The server sends its headers as soon as it accepted the watch (an
	// older one with the first message); a stream refused at once ends
	// without headers, and Recv returns why.
	if md, err := st.Header(); err == nil && md != nil {
		w.state(WatchState{Connected: true})
	}
	for {
		msg, err := st.Recv()
		if err != nil {
			return received, err
		}
		received = true
		if r, ok := w.accept(msg); ok && !w.send(ctx, r) {
			return received, ctx.Err()
		}
	}
}

// accept records what msg delivers and returns the response for the
// caller; ok is false when msg holds nothing new.
func (w *watchStream) accept(msg *probev1.WatchResponse) (r WatchResponse, ok bool) {
	r = WatchResponse{
		Events:           msg.GetEvents(),
		Snapshot:         msg.GetSnapshot(),
		SnapshotComplete: msg.GetSnapshotComplete(),
		ProgressNotify:   msg.GetProgressNotify(),
		Revision:         msg.GetRevision(),
	}
	if r.Snapshot {
		// Snapshot events carry the revision of each target's last change,
		// which may be anywhere below the snapshot's revision.
		r.Resynced, w.resync = w.resync, false
		w.inSnapshot = !r.SnapshotComplete
		if r.SnapshotComplete {
			w.next = max(w.next, r.Revision+1)
		}
		return r, true
	}
	// Never deliver an event twice, whatever the server replays.
	seen := func(ev *probev1.Event) bool { return ev.GetRevision() < w.next }
	if slices.ContainsFunc(r.Events, seen) {
		r.Events = slices.DeleteFunc(slices.Clone(r.Events), seen)
		if len(r.Events) == 0 && !r.ProgressNotify {
			w.next = max(w.next, r.Revision+1)
			return r, false
		}
	}
	if n := len(r.Events); n > 0 {
		w.next = max(w.next, r.Events[n-1].GetRevision()+1)
	}
	w.next = max(w.next, r.Revision+1)
	return r, true
}

func (w *watchStream) state(s WatchState) {
	if w.opts.onState != nil {
		w.opts.onState(s)
	}
}

func (w *watchStream) send(ctx context.Context, r WatchResponse) bool {
	select {
	case w.out <- r:
		return true
	case <-ctx.Done():
		return false
	}
}

// backoff returns the delay before reconnection attempt n (from 0):
// exponential from minBackoff, capped at maxBackoff, with equal jitter.
func (o *watchOptions) backoff(n int) time.Duration {
	d := o.minBackoff
	for range n {
		if d >= o.maxBackoff {
			break
		}
		d *= 2
	}
	d = min(d, o.maxBackoff)
	return d/2 + rand.N(d/2+1)
}

// sleep waits for d or until ctx is done; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
