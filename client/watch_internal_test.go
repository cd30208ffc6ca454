package client

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// These tests script the server's side of Watch exactly, for the cases a
// real server produces only by chance (a connection cut between two
// messages of a snapshot, a replay overlapping what was delivered).

// script is one Watch call: the since_revision it expects, the messages it
// sends, and how it ends (nil: it stays open until the watch is canceled).
type script struct {
	since uint64
	msgs  []*probev1.WatchResponse
	err   error
}

type fakeService struct {
	probev1.ProbeServiceClient // only Watch is implemented

	t       *testing.T
	mu      sync.Mutex
	scripts []script
}

func (f *fakeService) Watch(ctx context.Context, req *probev1.WatchRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[probev1.WatchResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.scripts) == 0 {
		f.t.Errorf("unexpected Watch(since %d)", req.GetSinceRevision())
		return nil, status.Error(codes.Internal, "no more scripts")
	}
	s := f.scripts[0]
	f.scripts = f.scripts[1:]
	if req.GetSinceRevision() != s.since {
		f.t.Errorf("Watch since %d, want %d", req.GetSinceRevision(), s.since)
	}
	return &fakeStream{ctx: ctx, s: s}, nil
}

type fakeStream struct {
	grpc.ClientStream // only Recv is implemented
	ctx               context.Context
	s                 script
}

// Header says the stream is open unless it fails without a message (a
// trailers-only response: no headers and no error, Recv says why).
func (f *fakeStream) Header() (metadata.MD, error) {
	refused := len(f.s.msgs) == 0 && f.s.err != nil
	if refused {
		return nil, nil
	}
	return metadata.MD{}, nil
}

func (f *fakeStream) Recv() (*probev1.WatchResponse, error) {
	if len(f.s.msgs) > 0 {
		m := f.s.msgs[0]
		f.s.msgs = f.s.msgs[1:]
		return m, nil
	}
	if f.s.err != nil {
		return nil, f.s.err
	}
	<-f.ctx.Done()
	return nil, status.FromContextError(f.ctx.Err()).Err()
}

func snap(complete bool, rev uint64, names ...string) *probev1.WatchResponse {
	m := &probev1.WatchResponse{Snapshot: true, SnapshotComplete: complete, Revision: rev}
	for _, n := range names {
		m.Events = append(m.Events, &probev1.Event{Name: n, Kind: probev1.EventKind_EVENT_KIND_SNAPSHOT, Revision: 1})
	}
	return m
}

func live(revs ...uint64) *probev1.WatchResponse {
	m := &probev1.WatchResponse{}
	for _, r := range revs {
		m.Events = append(m.Events, &probev1.Event{Name: "x", Kind: probev1.EventKind_EVENT_KIND_TRANSITION, Revision: r})
		m.Revision = r
	}
	return m
}

func progress(rev uint64) *probev1.WatchResponse {
	return &probev1.WatchResponse{ProgressNotify: true, Revision: rev}
}

func withInfo(code codes.Code, reason string) error {
	st, err := status.New(code, "ended").WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "probed.dev"})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

var unavailable = status.Error(codes.Unavailable, "connection lost")

// delivered summarizes a response for comparison.
type delivered struct {
	Snapshot, Complete, Progress, Resynced bool
	Names                                  []string
	Revs                                   []uint64
	Err                                    codes.Code
}

func summarize(r WatchResponse) delivered {
	d := delivered{Snapshot: r.Snapshot, Complete: r.SnapshotComplete, Progress: r.ProgressNotify, Resynced: r.Resynced}
	for _, ev := range r.Events {
		if r.Snapshot {
			d.Names = append(d.Names, ev.GetName())
		} else {
			d.Revs = append(d.Revs, ev.GetRevision())
		}
	}
	if r.Err != nil {
		d.Err = status.Code(r.Err)
	}
	return d
}

func TestWatchScripted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    []WatchOption
		scripts []script
		want    []delivered
		closed  bool // the channel closes after want
	}{
		{
			name: "drop in the middle of a snapshot restarts it",
			scripts: []script{
				{since: 0, msgs: []*probev1.WatchResponse{snap(false, 5, "a")}, err: unavailable},
				{since: 0, msgs: []*probev1.WatchResponse{snap(false, 6, "a"), snap(true, 6, "b"), live(7)}},
			},
			want: []delivered{
				{Snapshot: true, Names: []string{"a"}},
				{Snapshot: true, Resynced: true, Names: []string{"a"}},
				{Snapshot: true, Complete: true, Names: []string{"b"}},
				{Revs: []uint64{7}},
			},
		},
		{
			name: "drop before any snapshot message is no resync",
			scripts: []script{
				{since: 0, err: unavailable},
				{since: 0, msgs: []*probev1.WatchResponse{snap(true, 3, "a")}},
			},
			want: []delivered{{Snapshot: true, Complete: true, Names: []string{"a"}}},
		},
		{
			name: "resume after the last event, dropping replayed ones",
			scripts: []script{
				{since: 0, msgs: []*probev1.WatchResponse{snap(true, 5, "a"), live(6, 8)}, err: unavailable},
				{since: 9, msgs: []*probev1.WatchResponse{live(8), live(8, 9), live(12)}},
			},
			want: []delivered{
				{Snapshot: true, Complete: true, Names: []string{"a"}},
				{Revs: []uint64{6, 8}},
				{Revs: []uint64{9}},
				{Revs: []uint64{12}},
			},
		},
		{
			name: "progress moves the resume revision",
			scripts: []script{
				{since: 0, msgs: []*probev1.WatchResponse{snap(true, 5), progress(9)}, err: io.EOF},
				{since: 10, msgs: []*probev1.WatchResponse{live(10)}},
			},
			want: []delivered{
				{Snapshot: true, Complete: true},
				{Progress: true},
				{Revs: []uint64{10}},
			},
		},
		{
			name: "slow watcher resumes",
			opts: []WatchOption{WithSince(4)},
			scripts: []script{
				{since: 4, msgs: []*probev1.WatchResponse{live(4, 5)}, err: withInfo(codes.ResourceExhausted, "WATCHER_TOO_SLOW")},
				{since: 6, msgs: []*probev1.WatchResponse{live(6)}},
			},
			want: []delivered{{Revs: []uint64{4, 5}}, {Revs: []uint64{6}}},
		},
		{
			name: "compacted resume resyncs",
			opts: []WatchOption{WithSince(4)},
			scripts: []script{
				{since: 4, msgs: []*probev1.WatchResponse{live(4)}, err: unavailable},
				{since: 5, err: withInfo(codes.OutOfRange, "REVISION_COMPACTED")},
				{since: 0, msgs: []*probev1.WatchResponse{snap(true, 20, "a"), live(21)}},
			},
			want: []delivered{
				{Revs: []uint64{4}},
				{Snapshot: true, Complete: true, Resynced: true, Names: []string{"a"}},
				{Revs: []uint64{21}},
			},
		},
		{
			name: "other resource exhaustion is terminal",
			scripts: []script{
				{since: 0, err: status.Error(codes.ResourceExhausted, "message too large")},
			},
			want:   []delivered{{Err: codes.ResourceExhausted}},
			closed: true,
		},
		{
			name: "out of range on a snapshot is terminal",
			scripts: []script{
				{since: 0, err: withInfo(codes.OutOfRange, "REVISION_COMPACTED")},
			},
			want:   []delivered{{Err: codes.OutOfRange}},
			closed: true,
		},
		{
			name: "invalid is terminal after events",
			scripts: []script{
				{since: 0, msgs: []*probev1.WatchResponse{snap(true, 1)}, err: status.Error(codes.InvalidArgument, "bad")},
			},
			want:   []delivered{{Snapshot: true, Complete: true}, {Err: codes.InvalidArgument}},
			closed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			f := &fakeService{t: t, scripts: tt.scripts}
			c := &Client{svc: f}
			ch := c.Watch(ctx, append(tt.opts, WithBackoff(time.Millisecond, 2*time.Millisecond))...)
			var got []delivered
			for range tt.want {
				select {
				case r := <-ch:
					got = append(got, summarize(r))
				case <-time.After(5 * time.Second):
					t.Fatalf("timed out after %d responses: %+v", len(got), got)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("responses (-want +got):\n%s", diff)
			}
			if tt.closed {
				if r, ok := <-ch; ok {
					t.Errorf("response after the terminal error: %+v", summarize(r))
				}
			}
			cancel()
			for range ch {
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.scripts) > 0 {
				t.Errorf("%d scripted Watch calls not made", len(f.scripts))
			}
		})
	}
}

func TestErrorsKeepStatus(t *testing.T) {
	t.Parallel()
	err := fromStatus(status.Error(codes.NotFound, `target "x": not found`))
	if !errors.Is(err, ErrNotFound) || status.Code(err) != codes.NotFound || err.Error() != `target "x": not found` {
		t.Errorf("fromStatus(NotFound) = %v (code %v)", err, status.Code(err))
	}
	if again := fromStatus(err); !errors.Is(again, ErrNotFound) || again.Error() != err.Error() {
		t.Errorf("fromStatus is not idempotent: %v", again)
	}
	internal := status.Error(codes.Internal, "boom")
	if got := fromStatus(internal); !errors.Is(got, internal) {
		t.Errorf("fromStatus(Internal) = %v, want it unchanged", got)
	}
	plain := errors.New("plain")
	if got := fromStatus(plain); !errors.Is(got, plain) {
		t.Errorf("fromStatus(plain) = %v, want it unchanged", got)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	o := watchOptions{minBackoff: 100 * time.Millisecond, maxBackoff: 5 * time.Second}
	for n, want := range []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000} {
		want *= time.Millisecond
		for range 20 {
			if got := o.backoff(n); got < want/2 || got > want {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", n, got, want/2, want)
			}
		}
	}
	if got := o.backoff(1 << 20); got > o.maxBackoff {
		t.Errorf("backoff(huge) = %v, want at most %v", got, o.maxBackoff)
	}
}
