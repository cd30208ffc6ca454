package clustersoak

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// event is what a watcher saw of one event: enough to compare exactly.
type event struct {
	rev      uint64
	name     string
	kind     probev1.EventKind
	probe    probev1.ProbeType
	from, to probev1.Result
	sum      uint64 // FNV-1a of the event's deterministic encoding
}

func eventOf(ev *probev1.Event) event {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
	if err != nil {
		panic(err) // a message just decoded encodes
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return event{rev: ev.GetRevision(), name: ev.GetName(), kind: ev.GetKind(), probe: ev.GetProbeType(), from: ev.GetFrom(), to: ev.GetTo(), sum: h.Sum64()}
}

// watcher follows the cluster's events from revision 1 through one
// replica (its home) for the whole soak, resuming after every failure
// from the revision after the last it covered: on its home when it
// serves, else on the next replica that does.
type watcher struct {
	home     int // index in the replicas
	replicas func() []*replica

	mu       sync.Mutex // guards the fields below
	events   []event
	pos      uint64 // every event up to pos was delivered
	streams  int
	away     int // streams on another replica than home
	ends     map[codes.Code]int
	problems []string
}

func (w *watcher) run(ctx context.Context) {
	for ctx.Err() == nil {
		r := w.pick()
		if r == nil {
			_ = sleep(ctx, 100*time.Millisecond)
			continue
		}
		err := w.stream(ctx, r)
		code := status.Code(err)
		w.mu.Lock()
		if w.ends == nil {
			w.ends = map[codes.Code]int{}
		}
		w.ends[code]++
		if code == codes.OutOfRange || code == codes.InvalidArgument {
			w.problems = append(w.problems, fmt.Sprintf("stream on %s from revision %d ended with %v", r.id, w.pos+1, err))
		}
		w.mu.Unlock()
		_ = sleep(ctx, 50*time.Millisecond)
	}
}

// pick is the replica to resume on.
func (w *watcher) pick() *replica {
	rs := w.replicas()
	for i := range rs {
		r := rs[(w.home+i)%len(rs)]
		if r.state() == running {
			return r
		}
	}
	return nil
}

func (w *watcher) stream(ctx context.Context, r *replica) error {
	svc := r.client()
	if svc == nil {
		return status.Error(codes.Unavailable, "not running")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	since := w.pos + 1
	w.streams++
	if r != w.replicas()[w.home] {
		w.away++
	}
	w.mu.Unlock()
	s, err := svc.Watch(ctx, &probev1.WatchRequest{SinceRevision: since})
	if err != nil {
		return err
	}
	for {
		resp, err := s.Recv()
		if err != nil {
			return err
		}
		w.mu.Lock()
		if resp.GetSnapshot() {
			w.problems = append(w.problems, fmt.Sprintf("a snapshot on %s for a watch from revision %d", r.id, since))
		}
		for _, ev := range resp.GetEvents() {
			e := eventOf(ev)
			if e.rev <= w.pos {
				w.problems = append(w.problems, fmt.Sprintf("on %s: revision %d after %d", r.id, e.rev, w.pos))
				continue
			}
			w.events = append(w.events, e)
			w.pos = e.rev
		}
		w.pos = max(w.pos, resp.GetRevision())
		w.mu.Unlock()
	}
}

// position is the revision up to which the watcher has delivered.
func (w *watcher) position() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pos
}

// upTo returns the events up to rev, and the problems seen.
func (w *watcher) upTo(rev uint64) ([]event, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []event
	for _, e := range w.events {
		if e.rev > rev {
			break
		}
		out = append(out, e)
	}
	return out, append([]string(nil), w.problems...)
}
